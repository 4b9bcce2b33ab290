"""What a training run in many stretches relies on (trkx.training, trkx.packaging.curves): a
fixed learning-rate horizon that a larger budget does not move, ``last.ckpt`` written one step
after each validation (a killed run loses at most the steps since it), and training seconds
summed over the stretches of a resumed run, read back as learning curves."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import pytorch_lightning as pl
import torch

from trkx.packaging.curves import stage_curve
from trkx.stages.schedules import warmup_cosine
from trkx.training.fit import _same_run

from .test_training_driver import CONFIG, train

pytestmark = [pytest.mark.usefixtures("one_thread"), pytest.mark.slow]  # every test trains


def last_state(checkpoint: Path) -> dict:
    return torch.load(checkpoint.with_suffix(".run") / "last.ckpt", weights_only=True)


def learning_rate(checkpoint: Path) -> float:
    return float(last_state(checkpoint)["optimizer_states"][0]["param_groups"][0]["lr"])


def test_a_fixed_horizon_keeps_the_schedule_when_the_budget_grows(gnn_data, tmp_path: Path,
                                                                  ) -> None:
    fixed = ["module.lr_horizon_steps=10", "module.lr_warmup_steps=1",
             "module.learning_rate=0.01"]
    resumed, straight = tmp_path / "resumed.pt", tmp_path / "straight.pt"
    assert train(gnn_data, resumed, "trainer.max_steps=3", *fixed) == 0
    assert train(gnn_data, resumed, "trainer.max_steps=6", *fixed) == 0
    assert train(gnn_data, straight, "trainer.max_steps=6", *fixed) == 0
    expected = 0.01 * warmup_cosine(6, 1, 10)
    assert learning_rate(resumed) == pytest.approx(expected, rel=1e-6)
    assert learning_rate(straight) == pytest.approx(expected, rel=1e-6)
    # without a horizon the cosine follows the budget: 6 steps end at the floor
    budget = tmp_path / "budget.pt"
    assert train(gnn_data, budget, "trainer.max_steps=6", "module.lr_warmup_steps=1",
                 "module.learning_rate=0.01") == 0
    assert learning_rate(budget) == pytest.approx(0.01 * warmup_cosine(6, 1, 6), rel=1e-6)


def test_a_bad_horizon_is_a_one_line_error(gnn_data, tmp_path: Path,
                                           capsys: pytest.CaptureFixture) -> None:
    assert train(gnn_data, tmp_path / "g.pt", "module.lr_horizon_steps=0") == 2
    assert "lr_horizon_steps must be a positive step count or null, got 0" in \
        capsys.readouterr().err


def test_last_checkpoint_follows_each_validation(gnn_data, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    saved: list[tuple[str, int]] = []
    original = pl.Trainer.save_checkpoint

    def spy(trainer, path, *args, **kwargs):
        saved.append((Path(path).name, int(trainer.global_step)))
        return original(trainer, path, *args, **kwargs)

    monkeypatch.setattr(pl.Trainer, "save_checkpoint", spy)
    # 3 training events: one epoch is 3 steps; validations after steps 2 and 4 (within epochs)
    assert train(gnn_data, tmp_path / "g.pt", "trainer.max_steps=5",
                 "trainer.val_every_n_steps=2") == 0
    last = [step for name, step in saved if name == "last.ckpt"]
    assert 3 in last and 5 in last    # one step after the validations at steps 2 and 4


def test_training_seconds_add_up_over_resumed_stretches(gnn_data, tmp_path: Path) -> None:
    checkpoint = tmp_path / "gnn.pt"
    logged = ["trainer.logger=csv", "trainer.val_every_n_steps=2"]
    assert train(gnn_data, checkpoint, "trainer.max_steps=4", *logged) == 0
    first = stage_curve(checkpoint.with_suffix(".run"))
    assert train(gnn_data, checkpoint, "trainer.max_steps=8", *logged) == 0
    curve = stage_curve(checkpoint.with_suffix(".run"))
    assert [row["step"] for row in first] == [1.0, 3.0]       # Lightning logs step - 1
    steps = [row["step"] for row in curve]
    assert curve[:2] == first and len(steps) == 4 and steps == sorted(set(steps))
    assert steps[2] > 4       # the second stretch validates after the step it resumed from
    seconds = [row["train_seconds"] for row in curve]
    assert all(s > 0 for s in seconds) and seconds == sorted(seconds)
    assert seconds[2] > first[-1]["train_seconds"]            # the second stretch adds on
    assert all("val_auc" in row and 0.0 <= row["val_auc"] <= 1.0 for row in curve)
    assert last_state(checkpoint)["global_step"] == 8


def test_a_resumed_sampled_run_begins_a_new_pass(gnn_data, tmp_path: Path) -> None:
    """Sampled minibatches: the passes over the events begun are saved with the run, and a
    resumed stretch begins the next pass instead of replaying the interrupted one's start."""
    sampled = ["sampling.targets_per_batch=64", "sampling.hops=1", "sampling.bulk=1"]
    config = CONFIG.with_name("gnn_sampled.yaml")
    checkpoint = tmp_path / "gnn.pt"
    assert train(gnn_data, checkpoint, "trainer.max_steps=2", *sampled, config=config) == 0
    assert passes_begun(checkpoint) == 1                                  # within pass 0
    assert train(gnn_data, checkpoint, "trainer.max_steps=4", *sampled, config=config) == 0
    assert passes_begun(checkpoint) == 2 and last_state(checkpoint)["global_step"] == 4


def passes_begun(checkpoint: Path) -> int:
    (loader,) = last_state(checkpoint)["loops"]["fit_loop"]["state_dict"]["combined_loader"]
    return loader["passes_begun"]


def test_a_key_later_counted_as_a_budget_keeps_older_runs_resumable() -> None:
    config = {"model": {"hidden": 8}, "module": {}, "trainer": {"seed": 0, "monitor": "val_auc"}}
    # the resume key as a trkx that did not yet count ``monitor`` as a budget key wrote it
    older = json.dumps({"model": {"hidden": 8}, "module": {},
                        "trainer": {"seed": 0, "monitor": "val_loss"}}, sort_keys=True)
    assert _same_run(older, config)
    assert not _same_run(older, {**config, "model": {"hidden": 6}})
    assert not _same_run("not json", config)


def test_a_run_reached_through_a_linked_folder_is_the_same_run(tmp_path: Path) -> None:
    """A checkout whose ``runs`` links to another's resumes that one's runs: the data folders
    are compared where they lead, not as written."""
    (tmp_path / "main" / "runs" / "graphs").mkdir(parents=True)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "runs").symlink_to(tmp_path / "main" / "runs")
    written = {"model": {"hidden": 8}, "module": {}, "trainer": {"seed": 0},
               "data": {"train_dir": str(tmp_path / "other" / "runs" / "graphs")}}
    here = {**written, "data": {"train_dir": str(tmp_path / "main" / "runs" / "graphs")}}
    assert _same_run(json.dumps(written, sort_keys=True), here)
    elsewhere = {**written, "data": {"train_dir": str(tmp_path / "main")}}
    assert not _same_run(json.dumps(written, sort_keys=True), elsewhere)


def test_the_card_counts_a_resumed_training_over_all_its_stretches(tmp_path: Path) -> None:
    """The last invocation's step marker of a resumed training holds only that stretch (here
    the 28 s of an export); the logged ``train_seconds`` hold every stretch."""
    from trkx.packaging.card import training_seconds

    steps = tmp_path / ".trkx" / "steps"
    steps.mkdir(parents=True)
    (steps / "train-gnn.json").write_text(json.dumps({"seconds": 28.0}))
    (steps / "train-filter.json").write_text(json.dumps({"seconds": 430.0}))
    curves = {"gnn": [{"step": 1000, "train_seconds": 570.0},
                      {"step": 5000, "train_seconds": 2576.0}]}
    assert training_seconds(tmp_path, "gnn", curves) == 2576.0
    assert training_seconds(tmp_path, "filter", curves) == 430.0
    assert training_seconds(tmp_path, "embedding", curves) is None
