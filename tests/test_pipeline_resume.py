"""Resume that cannot lie, beyond edited stage configs (tests/test_pipeline_dry_run.py): a
pipeline override or a deleted output reruns exactly its step and everything downstream (the
plan of `trkx run` on the shipped configs, steps executed by a recorder that writes each step's
output)."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from trkx.config import config_files
from trkx.pipeline.config import load_pipeline_config
from trkx.pipeline.runner import Step, plan_states, run_steps
from trkx.pipeline.steps import plan_steps

CONFIGS = Path(__file__).resolve().parents[1] / "configs"

SIMULATE = ["simulate-train", "simulate-val", "simulate-test"]
EMBEDDING = ["train-embedding", "infer-embedding-train", "infer-embedding-val"]
FILTER = ["train-filter", "infer-filter-train", "infer-filter-val"]
GNN = ["train-gnn", "infer-gnn-val"]
TUNE = ["tune-tracks"]                     # the builder tuned on the GNN's validation scores
TRACKS = ["infer-test", "evaluate"]        # trkx infer on the test events, then evaluation


def pipeline(tmp_path: Path) -> Path:
    """configs/quickstart_hits_only.yaml with copies of its stage configs beside it."""
    config = yaml.safe_load((CONFIGS / "quickstart_hits_only.yaml").read_text())
    for plan in [*config["stages"].values(), config["tracks"]]:
        for file in config_files(CONFIGS / plan["config"]):  # with what it includes
            shutil.copy(file, tmp_path / file.name)
    path = tmp_path / "pipeline.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def execute_all(steps: list[Step], workdir: Path) -> list[str]:
    """Run the plan with an executor that writes each step's output; the names it ran."""
    by_argv = {step.argv: step for step in steps}
    ran: list[str] = []

    def write_output(argv) -> int:
        step = by_argv[tuple(argv)]
        ran.append(step.name)
        if step.output.suffix == ".pt":
            step.output.parent.mkdir(parents=True, exist_ok=True)
            step.output.write_bytes(b"weights")
        elif step.output.suffix == ".yaml":         # the tuned tracks config
            step.output.parent.mkdir(parents=True, exist_ok=True)
            step.output.write_text("builder: {}\n")
        else:
            step.output.mkdir(parents=True, exist_ok=True)
            (step.output / "event000000001.pt").write_bytes(b"record")
        return 0

    run_steps(steps, workdir, write_output, log=lambda _: None)
    return ran


def to_do(path: Path, workdir: Path) -> list[str]:
    """What `trkx run --dry-run` marks "to do" (the plan's states)."""
    steps = plan_steps(load_pipeline_config(path, []), workdir)
    return [name for name, state in plan_states(steps, workdir).items() if state is None]


def test_an_override_in_the_pipeline_reruns_its_stage_and_downstream(tmp_path: Path) -> None:
    path = pipeline(tmp_path)
    workdir = tmp_path / "work"
    execute_all(plan_steps(load_pipeline_config(path, []), workdir), workdir)
    edited = load_pipeline_config(path, ["stages.filter.overrides=[trainer.max_steps=1]"])
    steps = plan_steps(edited, workdir)
    assert execute_all(steps, workdir) == FILTER + GNN + TUNE + TRACKS


def test_a_deleted_output_reruns_its_step_and_downstream(tmp_path: Path) -> None:
    path = pipeline(tmp_path)
    workdir = tmp_path / "work"
    steps = plan_steps(load_pipeline_config(path, []), workdir)
    execute_all(steps, workdir)
    (workdir / "checkpoints" / "gnn.pt").unlink()
    assert execute_all(steps, workdir) == GNN + TUNE + TRACKS
    shutil.rmtree(workdir / "data" / "test")           # the test events: only their chain reruns
    assert execute_all(steps, workdir) == [SIMULATE[2], *TRACKS]
    assert to_do(path, workdir) == []
