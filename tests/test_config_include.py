"""``include:`` in configs: the stage configs share configs/trainer.yaml; a stage's own keys
win, section by section; the runner's fingerprint follows the included file."""

from __future__ import annotations

from pathlib import Path

import pytest

from trkx.config import ConfigError, config_files, load_config
from trkx.pipeline.runner import Step, config_fingerprint

CONFIGS = Path(__file__).resolve().parents[1] / "configs"


def test_stage_configs_share_the_trainer_block_and_keep_their_own_values() -> None:
    shared = load_config(CONFIGS / "trainer.yaml")["trainer"]
    embedding = load_config(CONFIGS / "embedding.yaml")
    gnn = load_config(CONFIGS / "gnn.yaml")
    assert "include" not in embedding
    assert set(embedding["trainer"]) == set(shared)             # every key, from one file
    assert embedding["trainer"]["max_steps"] == 1650 != shared["max_steps"]
    assert gnn["trainer"]["gradient_clip_val"] == 1.0 and shared["gradient_clip_val"] is None
    assert embedding["trainer"]["logger"] == gnn["trainer"]["logger"] == shared["logger"]
    for name in ("embedding", "filter", "gnn", "gnn_distributed", "gnn_sampled"):
        assert config_files(CONFIGS / f"{name}.yaml") == [CONFIGS / f"{name}.yaml",
                                                         CONFIGS / "trainer.yaml"]


def test_include_merges_recursively_and_refuses_loops(tmp_path: Path) -> None:
    (tmp_path / "base.yaml").write_text("a: {x: 1, y: 2}\nb: 3\n")
    (tmp_path / "top.yaml").write_text("include: base.yaml\na: {y: 5}\nc: 4\n")
    assert load_config(tmp_path / "top.yaml") == {"a": {"x": 1, "y": 5}, "b": 3, "c": 4}
    (tmp_path / "loop.yaml").write_text("include: loop.yaml\n")
    with pytest.raises(ConfigError, match=r"loop\.yaml: include: loop\.yaml includes itself"):
        load_config(tmp_path / "loop.yaml")
    (tmp_path / "missing.yaml").write_text("include: nowhere.yaml\n")
    with pytest.raises(ConfigError, match=r"include: no such config file .*nowhere\.yaml"):
        load_config(tmp_path / "missing.yaml")


def test_editing_an_included_file_changes_the_fingerprint(tmp_path: Path) -> None:
    (tmp_path / "base.yaml").write_text("trainer: {max_steps: 1}\n")
    (tmp_path / "stage.yaml").write_text("include: base.yaml\n")
    step = Step("train-x", "x", ("train", "x", "--config", str(tmp_path / "stage.yaml")),
                tmp_path / "x.pt")
    before = config_fingerprint(step)
    (tmp_path / "base.yaml").write_text("trainer: {max_steps: 2}\n")
    assert config_fingerprint(step) != before
