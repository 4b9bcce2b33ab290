"""The committed training state of a recipe (trkx.pipeline.state): `trkx run --save-state`
stores a work folder's run state without the work folder's path, and a fresh work folder
restored from it resumes each stage's training from its step."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import torch
import yaml

from trkx.cli import main as trkx_main
from trkx.pipeline.config import load_pipeline_config
from trkx.pipeline.state import WORKDIR_MARK, restore_state, save_state
from trkx.pipeline.steps import plan_steps

pytestmark = pytest.mark.slow


def with_state(config: Path, folder: Path, out: Path) -> Path:
    raw = yaml.safe_load(config.read_text())
    raw["state"] = {"folder": str(folder)}
    out.write_text(yaml.safe_dump(raw))
    return out


def test_saved_state_resumes_in_another_work_folder(tiny_run: tuple[Path, Path], tmp_path: Path,
                                                    capsys: pytest.CaptureFixture,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    config, workdir = tiny_run
    recipe = with_state(config, tmp_path / "state", tmp_path / "recipe.yaml")
    assert trkx_main(["run", str(recipe), "--workdir", str(workdir), "--save-state"]) == 0
    out = capsys.readouterr().out
    for stage in ("embedding", "filter", "gnn"):
        stored = tmp_path / "state" / stage
        assert f"{stage}: " in out and str(stored) in out
        assert {p.name for p in stored.iterdir()} >= {"last.ckpt", "config.json"}
        key = (stored / "config.json").read_text()
        assert str(workdir) not in key and WORKDIR_MARK in key
    # a work folder given relative (`--workdir runs/x`): the key's data folders are absolute,
    # and are stored under {workdir} all the same (else no other clone resumes them)
    monkeypatch.chdir(workdir.parent)
    relative = with_state(config, tmp_path / "state_rel", tmp_path / "recipe_rel.yaml")
    save_state(load_pipeline_config(relative), Path(workdir.name))
    key = (tmp_path / "state_rel" / "gnn" / "config.json").read_text()
    assert os.path.realpath(workdir) not in key and WORKDIR_MARK + "/graphs/" in key
    monkeypatch.undo()

    fresh = tmp_path / "fresh"
    pipeline = load_pipeline_config(recipe)
    assert restore_state(pipeline, fresh) == ["embedding", "filter", "gnn"]
    assert restore_state(pipeline, fresh) == []        # a work folder's own state is kept
    run = fresh / "checkpoints" / "gnn.run"
    best = torch.load(run / "last.ckpt", weights_only=True)["callbacks"]
    (best,) = [value for key, value in best.items() if key.startswith("ModelCheckpoint")]
    assert best["dirpath"] == os.path.realpath(run)   # else Lightning forgets the best score
    assert best["best_model_path"] == os.path.realpath(run / "best.ckpt")
    shutil.copytree(workdir / "graphs", fresh / "graphs")   # the GNN's training records
    gnn = next(step for step in plan_steps(pipeline, fresh) if step.name == "train-gnn")
    assert trkx_main([*gnn.argv, "--set", "trainer.max_steps=3"]) == 0
    assert f"gnn: resuming {run / 'last.ckpt'} at step 2" in capsys.readouterr().out
    assert torch.load(run / "last.ckpt", weights_only=True)["global_step"] == 3


def test_save_state_errors(tiny_run: tuple[Path, Path], tmp_path: Path,
                           capsys: pytest.CaptureFixture) -> None:
    config, workdir = tiny_run
    assert trkx_main(["run", str(config), "--workdir", str(workdir), "--save-state"]) == 2
    assert "no state.folder: the recipe keeps no training state" in capsys.readouterr().err
    recipe = with_state(config, tmp_path / "state", tmp_path / "recipe.yaml")
    assert trkx_main(["run", str(recipe), "--workdir", str(tmp_path / "empty"),
                      "--save-state"]) == 2
    assert "nothing to save" in capsys.readouterr().err
    assert not (tmp_path / "state").exists()
