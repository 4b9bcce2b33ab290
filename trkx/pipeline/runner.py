"""Run a list of pipeline steps, skipping those whose outputs are already there and valid.

A step is one ``trkx`` command line (e.g. ``trkx train embedding ...``) with the folder or file
it produces. When a step succeeds the runner writes a marker
``WORKDIR/.trkx/steps/NAME.json`` (atomically) holding the command line, a fingerprint of the
YAML configs it names, and its duration. A later run skips a step when its marker exists,
records the same command line and config contents, and its output is still present; anything
else (an interrupted step, an edited config, a deleted output) runs again, so an interrupted
``trkx run`` resumes where it stopped.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from trkx.atomic import atomic_write


class StepFailed(RuntimeError):
    """A pipeline step exited with a non-zero status."""


@dataclass(frozen=True)
class Step:
    """One command of the pipeline."""

    name: str                 # unique, e.g. "train-embedding"
    stage: str                # what the time is booked under, e.g. "embedding"
    argv: tuple[str, ...]     # arguments of `trkx` (without the program name)
    output: Path              # file or folder the step produces

    def marker(self, workdir: Path) -> Path:
        return workdir / ".trkx" / "steps" / f"{self.name}.json"


@dataclass(frozen=True)
class StepResult:
    step: Step
    seconds: float
    skipped: bool


def _write_json_atomic(path: Path, payload: dict) -> None:
    atomic_write(path, lambda tmp: tmp.write_text(json.dumps(payload, indent=2)))


def config_fingerprint(step: Step) -> str:
    """SHA-256 over the contents of the YAML files the command line names."""
    digest = hashlib.sha256()
    for arg in step.argv:
        path = Path(arg)
        if path.suffix in (".yaml", ".yml") and path.is_file():
            digest.update(arg.encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def is_done(step: Step, workdir: Path) -> dict | None:
    """The marker of a finished, still valid step, else None."""
    marker = step.marker(workdir)
    if not marker.is_file() or not step.output.exists():
        return None
    try:
        payload = json.loads(marker.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    if payload.get("argv") != list(step.argv):
        return None
    if payload.get("configs") != config_fingerprint(step):
        return None
    if step.output.is_dir() and not any(step.output.iterdir()):
        return None
    return payload


def run_steps(steps: Sequence[Step], workdir: Path,
              execute: Callable[[Sequence[str]], int], log: Callable[[str], None] = print,
              ) -> list[StepResult]:
    """Run ``steps`` in order through ``execute(argv) -> exit status``; returns their times."""
    results = []
    for index, step in enumerate(steps, start=1):
        header = f"[{index}/{len(steps)}] {step.name}"
        done = is_done(step, workdir)
        if done is not None:
            log(f"{header}: done before ({done['seconds']:.1f} s), skipped")
            results.append(StepResult(step, float(done["seconds"]), skipped=True))
            continue
        log(f"{header}: trkx {' '.join(step.argv)}")
        start = time.perf_counter()
        status = execute(list(step.argv))
        seconds = time.perf_counter() - start
        if status != 0:
            raise StepFailed(f"step {step.name} failed (exit status {status}): "
                             f"trkx {' '.join(step.argv)}")
        _write_json_atomic(step.marker(workdir), {
            "argv": list(step.argv), "configs": config_fingerprint(step), "seconds": seconds,
            "finished": time.time()})
        log(f"{header}: finished in {seconds:.1f} s")
        results.append(StepResult(step, seconds, skipped=False))
    return results


def seconds_per_stage(results: Sequence[StepResult]) -> dict[str, float]:
    """Total seconds booked under each stage, in first-seen order."""
    totals: dict[str, float] = {}
    for result in results:
        totals[result.step.stage] = totals.get(result.step.stage, 0.0) + result.seconds
    return totals
