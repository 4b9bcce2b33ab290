"""The one training driver (trkx.training) through `trkx train gnn` on tiny real-event graphs:
every trainer key acts, seeds reproduce, runs resume, best weights are exported, a stage that
keeps no signal is refused."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from trkx.cli import main
from trkx.files.checkpoint import load_checkpoint

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "gnn.yaml"


pytestmark = [pytest.mark.usefixtures("one_thread"), pytest.mark.slow]  # every test trains


def train(folders: tuple[Path, Path], checkpoint: Path, *sets: str, config: Path = CONFIG,
          ) -> int:
    base = [f"data.train_dir={folders[0]}", f"data.val_dir={folders[1]}", "model.hidden=8",
            "model.n_graph_iters=1", "trainer.progress_bar=false", "trainer.logger=none",
            "trainer.min_signal_efficiency=0", "module.graph_ops=csr", "model.edge_features=0"]
    return main(["train", "gnn", "--config", str(config), "--checkpoint", str(checkpoint),
                 *(item for s in [*base, *sets] for item in ("--set", s))])


def weights(path: Path) -> dict[str, torch.Tensor]:
    return load_checkpoint(path, "gnn").state_dict


def last_step(checkpoint: Path) -> int:
    state = torch.load(checkpoint.with_suffix(".run") / "last.ckpt", weights_only=True)
    return int(state["global_step"])


def test_max_steps_and_seed(gnn_data, tmp_path: Path) -> None:
    assert train(gnn_data, tmp_path / "a.pt", "trainer.max_steps=4", "trainer.seed=3") == 0
    assert last_step(tmp_path / "a.pt") == 4           # 4 steps: one epoch and one step more
    assert train(gnn_data, tmp_path / "b.pt", "trainer.max_steps=4", "trainer.seed=3") == 0
    assert train(gnn_data, tmp_path / "c.pt", "trainer.max_steps=4", "trainer.seed=4") == 0
    a, b, c = (weights(tmp_path / f"{n}.pt") for n in "abc")
    assert all(torch.equal(a[k], b[k]) for k in a)      # same seed: identical weights
    assert not all(torch.equal(a[k], c[k]) for k in a)  # another seed: other weights


def test_interrupted_run_resumes_from_its_step(gnn_data, tmp_path: Path,
                                               capsys: pytest.CaptureFixture) -> None:
    checkpoint = tmp_path / "gnn.pt"
    assert train(gnn_data, checkpoint, "trainer.max_steps=3") == 0
    capsys.readouterr()
    assert train(gnn_data, checkpoint, "trainer.max_steps=6") == 0  # a longer budget resumes
    out = capsys.readouterr().out
    assert f"gnn: resuming {checkpoint.with_suffix('.run') / 'last.ckpt'} at step 3" in out
    assert "trained to step 6" in out and last_step(checkpoint) == 6
    # inference settings and the monitor do not change what is learned
    assert train(gnn_data, checkpoint, "trainer.max_steps=7", "inference.graph_ops=scatter",
                 "trainer.monitor=val_auc", "trainer.monitor_mode=max") == 0
    assert "at step 6" in capsys.readouterr().out and last_step(checkpoint) == 7
    assert train(gnn_data, checkpoint, "trainer.max_steps=6", "model.hidden=6") == 0
    out = capsys.readouterr().out
    assert "config changed, starting afresh" in out and "resuming" not in out
    previous = checkpoint.with_suffix(".run").with_name("gnn.run.previous")   # kept once
    assert f"the replaced run is kept in {previous}" in out
    assert torch.load(previous / "last.ckpt", weights_only=True)["global_step"] == 7
    assert load_checkpoint(checkpoint, "gnn").constructor["hidden"] == 6


def test_early_stopping_and_best_weights(gnn_data, tmp_path: Path) -> None:
    # Monitoring val_loss with mode "max" makes every later (lower) loss "no improvement":
    # patience 1 stops after the second validation (epoch 2, step 6) of a 30-step budget, and
    # the exported weights are the first validation's (step 3), not the last ones.
    checkpoint = tmp_path / "gnn.pt"
    assert train(gnn_data, checkpoint, "trainer.max_steps=30", "module.learning_rate=0.01",
                 "trainer.early_stopping_patience=1", "trainer.monitor_mode=max") == 0
    assert last_step(checkpoint) == 6
    stored = load_checkpoint(checkpoint, "gnn")
    assert stored.metrics["best_step"] == 3
    # the validation splits the signal edges by origin (the records carry production radii)
    assert 0.0 <= stored.metrics["val_efficiency_prompt"] <= 1.0
    assert "val_efficiency_secondary" in stored.metrics
    best = torch.load(checkpoint.with_suffix(".run") / "best.ckpt", weights_only=True)
    for name, tensor in stored.state_dict.items():
        assert torch.equal(tensor, best["state_dict"][f"model.{name}"])
    last = torch.load(checkpoint.with_suffix(".run") / "last.ckpt", weights_only=True)
    assert not all(torch.equal(t, last["state_dict"][f"model.{n}"])
                   for n, t in stored.state_dict.items())
    assert stored.working_point["edge_cut"] == pytest.approx(0.5)
    assert stored.config["trainer"]["early_stopping_patience"] == 1


def test_stage_without_signal_is_refused(gnn_data, tmp_path: Path,
                                         capsys: pytest.CaptureFixture) -> None:
    # At an edge cut of 0.99 an untrained network keeps no edge: validation efficiency 0.
    checkpoint = tmp_path / "gnn.pt"
    assert train(gnn_data, checkpoint, "trainer.max_steps=1", "module.edge_cut=0.99",
                 "trainer.min_signal_efficiency=0.05") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "validation keeps" in err[0] and "val_efficiency" in err[0]
    assert not checkpoint.exists()


def test_init_from_a_deeper_gnn_keeps_its_first_iterations(gnn_data, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture) -> None:
    """trainer.init_from a model of more iterations: the fewer-iteration network starts from its
    encoders, first iterations and classifier (one step at learning rate 0 exports them
    unchanged), and the log names the iterations left out."""
    source = tmp_path / "deep.pt"
    assert train(gnn_data, source, "trainer.max_steps=2", "model.n_graph_iters=2") == 0
    capsys.readouterr()
    shallow = tmp_path / "shallow.pt"
    assert train(gnn_data, shallow, "trainer.max_steps=1", "module.learning_rate=0",
                 f"trainer.init_from={source}") == 0
    assert "iterations 1 are left out" in capsys.readouterr().out
    deep, kept = weights(source), weights(shallow)
    assert all(torch.equal(kept[k], deep[k]) for k in kept)
    assert set(deep) - set(kept) == {k for k in deep if k.startswith(("edge_nets.1.",
                                                                      "node_nets.1."))}


def test_an_old_flag_is_an_argparse_error(capsys: pytest.CaptureFixture) -> None:
    """The flags of the previous release are gone: argparse's own error, exit status 2."""
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "gnn", "--config", str(CONFIG), "--output", "somewhere"])
    assert exit_info.value.code == 2
    assert "unrecognized arguments: --output somewhere" in capsys.readouterr().err


def test_init_from_starts_a_fresh_run_from_a_model(gnn_data, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture) -> None:
    """trainer.init_from: a fresh run starts from the given model's weights (fine-tuning), so
    one step at learning rate 0 exports them unchanged; a model of another width is one line,
    exit 2."""
    source = tmp_path / "source.pt"
    assert train(gnn_data, source, "trainer.max_steps=3", "trainer.seed=5") == 0
    tuned = tmp_path / "tuned.pt"
    assert train(gnn_data, tuned, "trainer.max_steps=1", "trainer.seed=9",
                 "module.learning_rate=0", f"trainer.init_from={source}") == 0
    a, b = weights(source), weights(tuned)
    assert all(torch.equal(a[k], b[k]) for k in a)
    fresh = tmp_path / "fresh.pt"     # the same run without init_from: the seed's weights
    assert train(gnn_data, fresh, "trainer.max_steps=1", "trainer.seed=9",
                 "module.learning_rate=0") == 0
    assert not all(torch.equal(a[k], weights(fresh)[k]) for k in a)
    capsys.readouterr()
    assert train(gnn_data, tmp_path / "wide.pt", "trainer.max_steps=1", "model.hidden=12",
                 f"trainer.init_from={source}") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "trainer.init_from does not fit" in err[0]
    missing = tmp_path / "nowhere.pt"        # refused before the first step
    assert train(gnn_data, tmp_path / "none.pt", "trainer.max_steps=1",
                 f"trainer.init_from={missing}") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"trainer.init_from {missing}: no such model file" in err[0]
    assert not (tmp_path / "none.pt").exists()


def test_a_run_past_its_memory_limit_stops_resumable(gnn_data, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture) -> None:
    """trainer.max_memory_gb below the process's RSS: the run stops after its first step with
    one line (exit 2), nothing exported, and last.ckpt resumes under a sane limit."""
    checkpoint = tmp_path / "gnn.pt"
    assert train(gnn_data, checkpoint, "trainer.max_steps=5", "trainer.max_memory_gb=0.01") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "resident memory" in err[0]
    assert "0.01 GB (trainer.max_memory_gb)" in err[0]
    assert not checkpoint.exists() and last_step(checkpoint) == 1
    assert train(gnn_data, checkpoint, "trainer.max_steps=5") == 0
    assert "resuming" in capsys.readouterr().out and last_step(checkpoint) == 5
