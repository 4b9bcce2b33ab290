"""The resumable step runner of `trkx run` (on real, tiny `trkx simulate` steps)."""

from __future__ import annotations

from pathlib import Path

import pytest

from trkx.cli import main as trkx_main
from trkx.pipeline.runner import Step, StepFailed, is_done, run_steps


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
