"""The resumable step runner of `trkx run` (on real, tiny `trkx simulate` steps)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from trkx.cli import main as trkx_main
from trkx.pipeline.runner import Step, StepFailed, is_done, run_steps, step_process


def simulate_step(workdir: Path, name: str, first_id: int) -> Step:
    out = workdir / name
    return Step(name, "simulate", ("simulate", "--out", str(out), "--n-events", "1", "--seed", "3",
                                   "--pileup", "1", "--first-event-id", str(first_id)), out)


def test_interrupted_run_resumes_without_redoing_finished_steps(tmp_path: Path) -> None:
    steps = [simulate_step(tmp_path, "a", 1), simulate_step(tmp_path, "b", 2)]
    calls: list[str] = []

    def interrupted(argv):
        calls.append(argv[2])
        if argv[2].endswith("b"):
            raise KeyboardInterrupt  # the user presses Ctrl-C during step b
        return trkx_main(argv)

    with pytest.raises(KeyboardInterrupt):
        run_steps(steps, tmp_path, interrupted, log=lambda _: None)
    assert is_done(steps[0], tmp_path) and not is_done(steps[1], tmp_path)

    calls.clear()

    def counting(argv):
        calls.append(argv[2])
        return trkx_main(argv)

    results = run_steps(steps, tmp_path, counting, log=lambda _: None)
    assert calls == [str(tmp_path / "b")]                    # a was not redone
    assert [r.skipped for r in results] == [True, False]
    assert (tmp_path / "b" / "event000000002-hits.csv.gz").is_file()


def test_changed_command_or_missing_output_reruns(tmp_path: Path) -> None:
    step = simulate_step(tmp_path, "a", 1)
    run_steps([step], tmp_path, trkx_main, log=lambda _: None)
    changed = Step(step.name, step.stage, (*step.argv[:-1], "5"), step.output)
    assert is_done(step, tmp_path) and not is_done(changed, tmp_path)
    for path in step.output.iterdir():
        path.unlink()
    assert not is_done(step, tmp_path)


def test_steps_run_in_processes_of_their_own(tmp_path: Path, monkeypatch) -> None:
    """`trkx run` executes each step as `python -m trkx ...` (step_process), so a step's memory
    goes back to the system when it ends: the step's work is done, its failure (exit status 2,
    its one-line error) stops the run, and nothing of it is loaded here."""
    import sys

    monkeypatch.delitem(sys.modules, "trkx.data.simulate.particles", raising=False)
    step = simulate_step(tmp_path, "a", 1)
    run_steps([step], tmp_path, step_process, log=lambda _: None)
    assert is_done(step, tmp_path) and (tmp_path / "a" / "event000000001-hits.csv.gz").is_file()
    assert "trkx.data.simulate.particles" not in sys.modules     # simulated elsewhere
    bad = Step("bad", "simulate", ("simulate", "--out", str(tmp_path / "x"), "--n-events", "0"),
               tmp_path / "x")
    assert step_process(bad.argv) == 2
    with pytest.raises(StepFailed, match="step bad failed \\(exit status 2\\)"):
        run_steps([bad], tmp_path, step_process, log=lambda _: None)


def test_failing_step_stops_the_run(tmp_path: Path) -> None:
    bad = Step("bad", "simulate", ("simulate", "--out", str(tmp_path / "x"), "--n-events", "1",
                                   "--particles-from", str(tmp_path / "missing")), tmp_path / "x")
    with pytest.raises(StepFailed, match="step bad failed"):
        run_steps([bad], tmp_path, trkx_main, log=lambda _: None)
    assert not is_done(bad, tmp_path)


def test_edited_config_reruns(tmp_path: Path) -> None:
    config = tmp_path / "stage.yaml"
    config.write_text("a: 1\n")
    out = tmp_path / "out"
    out.mkdir()
    (out / "x").write_text("")
    step = Step("s", "s", ("info", "--config", str(config)), out)
    run_steps([step], tmp_path, lambda argv: 0, log=lambda _: None)
    assert is_done(step, tmp_path)
    config.write_text("a: 2\n")
    assert not is_done(step, tmp_path)


def test_a_training_step_rerun_for_new_inputs_starts_afresh(tmp_path: Path) -> None:
    """A training run resumes when the same stage config wrote it, and that config names its
    data folders, not their contents: after a rerun upstream the runner moves the finished run
    aside, so the stage trains on the new inputs instead of resuming at its last step; an
    interrupted run with the same inputs still resumes."""
    model = tmp_path / "checkpoints" / "filter.pt"
    run = model.with_suffix(".run")
    seen: list[bool] = []     # whether each training call found a run to resume

    def train(argv, fail: bool = False):
        if argv[0] == "simulate":
            return trkx_main(argv)
        seen.append((run / "last.ckpt").is_file())
        run.mkdir(parents=True, exist_ok=True)
        (run / "last.ckpt").write_text("step 2000")
        if fail:
            raise KeyboardInterrupt
        model.write_text("model")
        return 0

    def plan(first_id: int, budget: str = "2000") -> list[Step]:
        events = simulate_step(tmp_path, "events", first_id)
        return [events, Step("train-filter", "filter", ("train", "filter", "--checkpoint",
                                                        str(model), "--set",
                                                        f"trainer.max_steps={budget}"),
                             model, inputs=("events",))]

    run_steps(plan(1), tmp_path, train, log=lambda _: None)
    logged: list[str] = []
    run_steps(plan(7), tmp_path, train, log=logged.append)      # the events made again
    assert seen == [False, False]
    assert (run.with_name("filter.run.previous") / "last.ckpt").is_file()
    assert any("inputs changed" in line for line in logged)

    (run / "step.json").unlink()       # a run finished before the stamps: the marker decides
    run_steps(plan(8), tmp_path, train, log=lambda _: None)
    assert seen == [False, False, False]

    model.unlink()                     # interrupted with the same inputs: resumes
    with pytest.raises(KeyboardInterrupt):
        run_steps(plan(8), tmp_path, lambda argv: train(argv, fail=True), log=lambda _: None)
    run_steps(plan(8), tmp_path, train, log=lambda _: None)
    assert seen == [False, False, False, True, True]

    # a raised budget, the same inputs: the finished run resumes (the stamp is the inputs')
    shutil.rmtree(run.with_name("filter.run.previous"))
    run_steps(plan(8, budget="4000"), tmp_path, train, log=lambda _: None)
    assert seen == [False, False, False, True, True, True]
    assert not run.with_name("filter.run.previous").exists()


def test_an_adopted_step_is_kept_when_its_inputs_are_made_again(tmp_path: Path) -> None:
    """A model made elsewhere and adopted (scripts/adopt_steps.py) is used as it is when the
    records it was trained on are deleted and remade with the same fingerprint; a step this
    runner made itself trains again; a changed recipe reruns even an adopted step."""
    from trkx.pipeline.runner import adopt, fingerprints, plan_states

    model = tmp_path / "checkpoints" / "filter.pt"
    trained: list[str] = []

    def execute(argv):
        if argv[0] == "simulate":
            return trkx_main(argv)
        trained.append(argv[1])
        model.write_text("trained here")
        return 0

    def plan(budget: str = "2000") -> list[Step]:
        events = simulate_step(tmp_path, "events", 1)
        return [events, Step("train-filter", "filter", ("train", "filter", "--checkpoint",
                                                        str(model), "--set",
                                                        f"trainer.max_steps={budget}"),
                             model, inputs=("events",))]

    run_steps(plan(), tmp_path, execute, log=lambda _: None)
    shutil.rmtree(tmp_path / "events")                 # records deleted: the filter retrains
    run_steps(plan(), tmp_path, execute, log=lambda _: None)
    assert trained == ["filter", "filter"]

    model.write_text("shipped")                        # a model made elsewhere, adopted
    adopt(plan()[1], tmp_path, fingerprints(plan())["train-filter"], seconds=130.0)
    shutil.rmtree(tmp_path / "events")
    states = plan_states(plan(), tmp_path)
    assert states["events"] is None and states["train-filter"]["seconds"] == 130.0
    results = run_steps(plan(), tmp_path, execute, log=lambda _: None)
    assert [r.skipped for r in results] == [False, True]
    assert trained == ["filter", "filter"] and model.read_text() == "shipped"

    run_steps(plan("3000"), tmp_path, execute, log=lambda _: None)  # the recipe changed
    assert trained == ["filter", "filter", "filter"]

    model.unlink()
    with pytest.raises(FileNotFoundError, match="its output"):
        adopt(plan()[1], tmp_path, fingerprints(plan())["train-filter"])
