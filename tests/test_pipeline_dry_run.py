"""`trkx run --dry-run` and resume on a work folder whose steps are marked done (nothing is
simulated or trained: the steps' outputs are stand-in files, the runner and planner are real)."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from trkx.cli import main as trkx_main
from trkx.config import config_files
from trkx.pipeline.config import load_pipeline_config
from trkx.pipeline.runner import Step, plan_states, run_steps
from trkx.pipeline.steps import plan_steps

from .test_pipeline_run import tiny_config

REPO = Path(__file__).resolve().parents[1]
CONFIGS = REPO / "configs"

SIMULATE = ["simulate-train", "simulate-val", "simulate-test"]
EMBEDDING = ["train-embedding", "infer-embedding-train", "infer-embedding-val"]
FILTER = ["train-filter", "infer-filter-train", "infer-filter-val"]
GNN = ["train-gnn", "infer-gnn-val"]
#: the builder tuned on the GNN's validation scores, trkx infer on the test events, evaluation
TRACKS = ["tune-tracks", "infer-test", "evaluate"]
#: The steps that run each stage (the ones whose command line names its config; `trkx infer`
#: reads every stage config, tracks.yaml included).
OWN_STEPS = {"embedding": EMBEDDING, "filter": FILTER, "gnn": GNN, "tracks": ["tune-tracks"]}
#: What an edit of each stage config must rerun: the stage and everything downstream of it.
RERUN = {"embedding": [*EMBEDDING, *FILTER, *GNN, *TRACKS],
         "filter": [*FILTER, *GNN, *TRACKS],
         "gnn": [*GNN, *TRACKS],
         "tracks": TRACKS}


def own_configs(tmp_path: Path) -> Path:
    """The tiny pipeline with copies of the stage configs in tmp_path (so they can be edited)."""
    pipeline = tiny_config(tmp_path)
    config = yaml.safe_load(pipeline.read_text())
    for plan in [*config["stages"].values(), config["tracks"]]:
        for included in config_files(plan["config"])[1:]:   # e.g. the shared trainer.yaml
            shutil.copy(included, tmp_path / included.name)
        copy = tmp_path / Path(plan["config"]).name
        shutil.copy(plan["config"], copy)
        plan["config"] = str(copy)
    pipeline.write_text(yaml.safe_dump(config))
    return pipeline


def produce(steps: list[Step], ran: list[str]):
    """An ``execute(argv)`` that writes a stand-in output for the step and records its name."""
    by_argv = {tuple(step.argv): step for step in steps}

    def execute(argv) -> int:
        step = by_argv[tuple(argv)]
        if step.output.suffix == ".pt":
            step.output.parent.mkdir(parents=True, exist_ok=True)
            step.output.write_bytes(b"stand-in")
        elif step.output.suffix == ".yaml":         # the tuned tracks config
            step.output.parent.mkdir(parents=True, exist_ok=True)
            step.output.write_text("builder: {}\n")
        else:
            step.output.mkdir(parents=True, exist_ok=True)
            (step.output / "stand-in").write_text("")
        ran.append(step.name)
        return 0
    return execute


def to_do(pipeline: Path, workdir: Path) -> list[str]:
    steps = plan_steps(load_pipeline_config(pipeline), workdir)
    states = plan_states(steps, workdir)
    return [step.name for step in steps if states[step.name] is None]


def test_editing_a_stage_config_reruns_exactly_its_downstream_steps(tmp_path: Path,
                                                                    capsys) -> None:
    """Edit embedding.yaml, filter.yaml, gnn.yaml, tracks.yaml in turn: the plan (and the dry
    run) marks exactly that stage and its downstream steps to do, also after a run that was
    interrupted once the edited stage's own steps had rerun; the runner reruns exactly those."""
    pipeline = own_configs(tmp_path)
    workdir = tmp_path / "work"
    steps = plan_steps(load_pipeline_config(pipeline), workdir)
    ran: list[str] = []
    run_steps(steps, workdir, produce(steps, ran), log=lambda _: None)
    assert ran == [*SIMULATE, *EMBEDDING, *FILTER, *GNN, *TRACKS]
    assert to_do(pipeline, workdir) == []

    stage_files = {name: Path(plan["config"]) for name, plan in
                   {**yaml.safe_load(pipeline.read_text())["stages"],
                    "tracks": yaml.safe_load(pipeline.read_text())["tracks"]}.items()}
    for stage, expected in RERUN.items():
        path = stage_files[stage]
        path.write_text(path.read_text() + f"\n# edited: {stage}\n")
        assert to_do(pipeline, workdir) == expected, stage
        if stage == "filter":   # the dry run prints the same plan
            capsys.readouterr()
            assert trkx_main(["run", str(pipeline), "--workdir", str(workdir),
                              "--dry-run"]) == 0
            lines = capsys.readouterr().out.splitlines()
            assert [line.split()[2] for line in lines if line.startswith(" to do")] == expected
            assert sum(line.startswith("  done") for line in lines) == len(steps) - len(expected)
        # Ctrl-C once the edited stage's own steps have rerun: the next plan still reruns
        # everything downstream (their fingerprints include the new upstream ones), though
        # their direct inputs are done and their own command lines did not change.
        own = len(OWN_STEPS[stage])
        ran.clear()
        steps = plan_steps(load_pipeline_config(pipeline), workdir)
        execute = produce(steps, ran)

        def interrupted(argv, execute=execute, own=own):
            if len(ran) == own:
                raise KeyboardInterrupt
            return execute(argv)
        with pytest.raises(KeyboardInterrupt):
            run_steps(steps, workdir, interrupted, log=lambda _: None)
        assert ran == expected[:own]
        assert to_do(pipeline, workdir) == expected[own:], stage
        ran.clear()
        run_steps(steps, workdir, execute, log=lambda _: None)
        assert ran == expected[own:], stage
        assert to_do(pipeline, workdir) == []


def test_dry_run_catches_a_typo_in_a_stage_override(tmp_path: Path, capsys) -> None:
    pipeline = tiny_config(tmp_path)
    config = yaml.safe_load(pipeline.read_text())
    config["stages"]["filter"]["overrides"].append("model.hiden=8")
    pipeline.write_text(yaml.safe_dump(config))
    workdir = tmp_path / "work"
    capsys.readouterr()
    assert trkx_main(["run", str(pipeline), "--workdir", str(workdir), "--dry-run"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""                       # no plan printed, nothing simulated
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"trkx run: error: {CONFIGS / 'filter.yaml'}: model: unknown "
                               "key 'hiden' (did you mean 'hidden'?)")
    assert not workdir.exists()


@pytest.mark.subprocess
@pytest.mark.skipif(not hasattr(fcntl, "F_SETPIPE_SZ"), reason="needs Linux pipe sizes")
def test_dry_run_into_a_reader_that_stops_after_one_line(tmp_path: Path) -> None:
    """`trkx run ... --dry-run | head -1`: the plan (over 20 kB with a long workdir path) does
    not fit the 4 kB pipe, so writes after the reader has gone fail with EPIPE; the command
    must end quietly (exit 141, like a shell pipeline's SIGPIPE), without a traceback."""
    workdir = tmp_path / ("w" * 200) / ("w" * 200)
    read, write = os.pipe()
    fcntl.fcntl(write, fcntl.F_SETPIPE_SZ, 4096)
    process = subprocess.Popen(
        [sys.executable, "-m", "trkx", "run", str(tiny_config(tmp_path)), "--workdir",
         str(workdir), "--dry-run"], stdout=write, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"})
    os.close(write)
    with os.fdopen(read, "rb") as reader:
        first = reader.readline()
    _, err = process.communicate(timeout=60)
    assert first.startswith(b" to do  simulate-train ")
    assert err == "" and process.returncode == 141


def test_init_from_is_taken_relative_to_the_recipe(tmp_path: Path) -> None:
    """A stage's trainer.init_from in a recipe names a model file relative to the recipe (as
    its stage configs are), whatever the current directory: the hits-only recipe moved along
    the beam starts its GNN from the model kept in its state folder, which must exist."""
    config = load_pipeline_config(CONFIGS / "recipes" / "pu200_far.yaml")
    step = next(s for s in plan_steps(config, tmp_path) if s.name == "train-gnn")
    init = [a for a in step.argv if a.startswith("trainer.init_from=")]
    assert len(init) == 1
    path = Path(init[0].split("=", 1)[1])
    assert path.is_absolute() and path.resolve() == REPO / "state" / "pu200_far" / "init_gnn.pt"
    assert path.is_file()


def test_the_cells_recipe_checks_its_init_from_before_any_step(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    """From any directory a recipe's dry run passes (its GNN's init_from is a model file
    relative to the recipe); an init_from naming no file is one line, exit 2, before the first
    step."""
    monkeypatch.chdir(tmp_path)
    recipe = str(CONFIGS / "recipes" / "pu200_far.yaml")
    assert trkx_main(["run", recipe, "--workdir", str(tmp_path / "w"), "--dry-run"]) == 0
    capsys.readouterr()
    gnn = ["trainer.max_steps=10", "trainer.init_from=nowhere.pt"]
    assert trkx_main(["run", recipe, "--workdir", str(tmp_path / "w"), "--dry-run",
                      "--set", f"stages.gnn.overrides={gnn}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "trainer.init_from" in err[0] and "nowhere.pt: no such" in err[0]
    assert not (tmp_path / "w").exists()


def test_the_distilled_recipes_teacher_is_a_model_file_relative_to_the_recipe(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    """module.teacher is resolved and checked as trainer.init_from is: the distilled cells
    recipe's teacher is the copy in its state folder; a teacher naming no file is one line,
    exit 2, before the first step."""
    config = load_pipeline_config(CONFIGS / "recipes" / "pu200_cells_small.yaml")
    step = next(s for s in plan_steps(config, tmp_path) if s.name == "train-gnn")
    teacher = [a for a in step.argv if a.startswith("module.teacher=")]
    assert len(teacher) == 1
    path = Path(teacher[0].split("=", 1)[1])
    assert path.is_absolute() and path.resolve() == (REPO / "state" / "pu200_cells_small"
                                                     / "teacher_gnn.pt")
    monkeypatch.chdir(tmp_path)
    recipe = str(CONFIGS / "recipes" / "pu200_cells_small.yaml")
    gnn = ["trainer.max_steps=10", "module.teacher=nowhere.pt"]
    assert trkx_main(["run", recipe, "--workdir", str(tmp_path / "w"), "--dry-run",
                      "--set", f"stages.gnn.overrides={gnn}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "module.teacher" in err[0] and "nowhere.pt: no such" in err[0]
    assert not (tmp_path / "w").exists()


def test_the_track_fit_takes_the_field_the_events_were_simulated_in(tmp_path: Path) -> None:
    """The tuned tracks config's field_map is the recipe's events.field_map (the recipe's own
    tracks overrides come after it, so they may change it)."""
    for recipe, field in (("recipes/pu200_far.yaml", "solenoid"), ("quickstart.yaml", "uniform")):
        config = load_pipeline_config(CONFIGS / recipe)
        step = next(s for s in plan_steps(config, tmp_path) if s.name == "tune-tracks")
        assert f"builder.field_map={field}" in step.argv


def test_until_plans_and_runs_the_steps_up_to_the_named_one(tmp_path: Path, capsys) -> None:
    """`--until STEP`: the dry run lists the steps through STEP only; a run makes those
    outputs and none after (here the training and validation events, not the test events),
    says where it stopped and evaluates nothing."""
    pipeline = tiny_config(tmp_path)
    workdir = tmp_path / "work"
    capsys.readouterr()
    assert trkx_main(["run", str(pipeline), "--workdir", str(workdir), "--dry-run",
                      "--until", "infer-filter-val"]) == 0
    listed = [line.split()[2] for line in capsys.readouterr().out.splitlines()]
    assert listed == [*SIMULATE, *EMBEDDING, *FILTER]
    assert trkx_main(["run", str(pipeline), "--workdir", str(workdir),
                      "--until", "simulate-val"]) == 0
    assert "stopped after simulate-val" in capsys.readouterr().out
    assert any((workdir / "data" / "train").glob("*-hits.csv*"))
    assert any((workdir / "data" / "val").glob("*-hits.csv*"))
    assert not (workdir / "data" / "test").exists()
    assert not (workdir / "evaluate").exists()
    assert to_do(pipeline, workdir)[0] == "simulate-test"


def test_until_an_unknown_step_is_one_line_before_any_work(tmp_path: Path, capsys) -> None:
    pipeline = tiny_config(tmp_path)
    workdir = tmp_path / "work"
    capsys.readouterr()
    assert trkx_main(["run", str(pipeline), "--workdir", str(workdir),
                      "--until", "train-gnnn"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "--until train-gnnn: no such step" in err[0] and "train-gnn," in err[0]
    assert not workdir.exists()
