"""The committed state of each pile-up-200 recipe resumes under the committed recipe: a recipe
edit that changes a stage's config (not its budget) would silently restart that stage's
training from step 0 on the next stretch, which this test turns into a failure."""

from __future__ import annotations

from pathlib import Path

import pytest

from trkx.config import apply_overrides, load_config
from trkx.pipeline.config import load_pipeline_config
from trkx.pipeline.state import restore_state, run_folder, state_folder
from trkx.pipeline.steps import plan_steps
from trkx.training.fit import _same_run

CONFIGS = Path(__file__).resolve().parents[1] / "configs"


def training_config(argv: tuple[str, ...]) -> dict:
    """The config `trkx train STAGE ARGV` trains with (trkx.stages.tools.run_train)."""
    args = list(argv)
    sets = [args[i + 1] for i, arg in enumerate(args) if arg == "--set"]
    checkpoint = args[args.index("--checkpoint") + 1]
    config = load_config(args[args.index("--config") + 1])
    return apply_overrides(config, [*sets, f"checkpoint={checkpoint}"])


@pytest.mark.parametrize("name, gnn_stored", [
    ("pu200_cells_far", True), ("pu200_far", True), ("pu200_cells_small", True),
    ("pu200_cells_along", True),
    ("pu200_cells_focal", True), ("pu200_cells_fast", True), ("pu200_far_fast", True)])
def test_every_stored_stage_resumes_under_the_recipe(tmp_path: Path, name: str,
                                                     gnn_stored: bool) -> None:
    recipe = CONFIGS / "recipes" / f"{name}.yaml"
    pipeline = load_pipeline_config(recipe)
    assert state_folder(pipeline) is not None
    workdir = tmp_path / "work"
    restored = restore_state(pipeline, workdir)
    stored = [stage for stage in ("embedding", "filter", "gnn")
              if (state_folder(pipeline) / stage / "last.ckpt").is_file()]
    assert restored == stored and ("gnn" in restored) == gnn_stored and restored
    for step in plan_steps(pipeline, workdir):
        stage = step.name.removeprefix("train-")
        if not step.name.startswith("train-") or stage not in restored:
            continue
        saved = (run_folder(workdir, stage) / "config.json").read_text()
        if not _same_run(saved, training_config(step.argv)):
            pytest.fail(f"{recipe}: the {stage} stage's config differs from the one that wrote "
                        f"state/{name}/{stage}: the next `trkx run` would restart it from step 0 "
                        "(revert the edit, or save the restarted run's state with --save-state)")
