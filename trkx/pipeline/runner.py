"""Run a list of pipeline steps, skipping those whose outputs are already there and valid.

A step is one ``trkx`` command line (e.g. ``trkx train embedding ...``) with the folder or file
it produces. When a step succeeds the runner writes a marker
``WORKDIR/.trkx/steps/NAME.json`` (atomically) holding its fingerprint and duration. The
fingerprint is a SHA-256 over the step's command line, the contents of the YAML configs it names
and the fingerprints of the steps it reads from (``Step.inputs``), so an edit anywhere upstream
changes the fingerprint of every step downstream. A later run skips a step when its marker holds
the same fingerprint, its output is still present and none of its inputs ran again in this run
(an adopted step, :func:`adopt`, is kept even then: its output was made elsewhere, from inputs
with the same fingerprints, and is used as it is); anything else (an interrupted step, an
edited config, a deleted output, a rerun upstream) runs again, so an interrupted ``trkx run``
resumes where it stopped and never reports stale results.

A training step resumes its run folder (``MODEL.run``, trkx.training.fit.run_folder) when the
same stage config wrote it; the config names its data folders, not what is in them. So the
runner stamps each training step's run folder with the fingerprint of the step's inputs (the
fingerprints of the steps it reads from: :func:`input_fingerprint`), and a step that runs for
other inputs (a rerun upstream remade its events or graphs) moves a run folder stamped, or
finished, under other inputs aside (``MODEL.run.previous``) and trains afresh, instead of
resuming a finished run trained on the old inputs. Its own command line is not in the stamp: a
raised budget (``trainer.max_steps``) resumes the run, as the stage's resume key allows.

``trkx run`` executes each step in a process of its own (:func:`step_process`): what a step
holds (the filter's 100 training graphs of a pile-up-200 recipe, ~16 GB) goes back to the
system when it ends, instead of staying with the run into the next step (the GNN's training
started at 20 GB and stopped at its memory guard).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from trkx.config import config_files
from trkx.files.atomic import atomic_write


class StepFailed(RuntimeError):
    """A pipeline step exited with a non-zero status."""


@dataclass(frozen=True)
class Step:
    """One command of the pipeline."""

    name: str                 # unique, e.g. "train-embedding"
    stage: str                # what the time is booked under, e.g. "embedding"
    argv: tuple[str, ...]     # arguments of `trkx` (without the program name)
    output: Path              # file or folder the step produces
    inputs: tuple[str, ...] = ()   # names of the steps whose outputs it reads
    configs: tuple[Path, ...] = ()  # YAML files it reads that its command line does not name

    def marker(self, workdir: Path) -> Path:
        return workdir / ".trkx" / "steps" / f"{self.name}.json"


@dataclass(frozen=True)
class StepResult:
    step: Step
    seconds: float
    skipped: bool


def _write_json_atomic(path: Path, payload: dict) -> None:
    atomic_write(path, lambda tmp: tmp.write_text(json.dumps(payload, indent=2)))


def config_fingerprint(step: Step, made: frozenset[Path] = frozenset()) -> str:
    """SHA-256 over the contents of the YAML files the command line names and of
    ``step.configs``, with the files they include; not of the files in ``made``, which earlier
    steps write (the tuned tracks config: its producer's fingerprint stands for it)."""
    digest = hashlib.sha256()
    named = [part for arg in step.argv for part in (arg, arg.split("=", 1)[-1])]
    for part in [*named, *map(str, step.configs)]:
        path = Path(part)
        if path.suffix in (".yaml", ".yml") and path.is_file() and path not in made:
            for file in config_files(path):        # the file and what it includes
                digest.update(str(file).encode())
                digest.update(file.read_bytes())
    return digest.hexdigest()


def fingerprints(steps: Sequence[Step]) -> dict[str, str]:
    """Every step's fingerprint: argv, its configs' contents and its inputs' fingerprints."""
    result: dict[str, str] = {}
    made = frozenset(step.output for step in steps)
    for step in steps:
        digest = hashlib.sha256(json.dumps(list(step.argv)).encode())
        digest.update(config_fingerprint(step, made).encode())
        for name in step.inputs:
            if name not in result:
                raise ValueError(f"step {step.name} reads from {name!r}, which is not an "
                                 "earlier step")
            digest.update(f"{name}={result[name]}".encode())
        result[step.name] = digest.hexdigest()
    return result


def is_done(step: Step, workdir: Path, fingerprint: str | None = None) -> dict | None:
    """The marker of a finished, still valid step, else None (``fingerprint``: from
    :func:`fingerprints` over the whole plan; default: the step alone, without inputs)."""
    if fingerprint is None:
        fingerprint = fingerprints([Step(step.name, step.stage, step.argv, step.output,
                                         configs=step.configs)])[step.name]
    marker = step.marker(workdir)
    if not marker.is_file() or not step.output.exists():
        return None
    try:
        payload = json.loads(marker.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    if payload.get("fingerprint") != fingerprint:
        return None
    if step.output.is_dir() and not any(step.output.iterdir()):
        return None
    return payload


def is_adopted(marker: dict) -> bool:
    """Whether a step's marker says its output was made elsewhere and adopted (:func:`adopt`)."""
    return bool(marker.get("made"))


def adopt(step: Step, workdir: Path, fingerprint: str, seconds: float = 0.0,
          made: str = "made elsewhere, adopted") -> Path:
    """Mark ``step``, whose output is already in place (a model trained on another machine,
    a shipped model used as it is), as done under ``fingerprint`` (:func:`fingerprints` over the
    whole plan, so a later change of the recipe still reruns it); ``seconds``: the time it took
    where it was made (the model card adds them up). The runner keeps an adopted step when its
    inputs run again (their records were deleted and are remade): it never retrains it."""
    if not step.output.exists():
        raise FileNotFoundError(f"{step.name}: its output {step.output} is missing")
    marker = step.marker(workdir)
    _write_json_atomic(marker, {"argv": list(step.argv), "fingerprint": fingerprint,
                                "seconds": float(seconds), "finished": time.time(),
                                "made": made})
    return marker


def _still_done(step: Step, workdir: Path, fingerprint: str, upstream_reruns: bool
                ) -> dict | None:
    """The step's valid marker, unless an input runs again in this run and it is not adopted."""
    done = is_done(step, workdir, fingerprint)
    if done is not None and upstream_reruns and not is_adopted(done):
        return None
    return done


def plan_states(steps: Sequence[Step], workdir: Path) -> dict[str, dict | None]:
    """The valid marker of every step (None: to run), a rerun propagating downstream."""
    prints = fingerprints(steps)
    states: dict[str, dict | None] = {}
    for step in steps:
        upstream_reruns = any(states.get(name) is None for name in step.inputs)
        states[step.name] = _still_done(step, workdir, prints[step.name], upstream_reruns)
    return states


def input_fingerprint(step: Step, prints: dict[str, str]) -> str:
    """The fingerprint of what ``step`` reads: the fingerprints of its input steps
    (``prints``: :func:`fingerprints` over the plan)."""
    digest = hashlib.sha256(b"inputs")
    for name in step.inputs:
        digest.update(f"{name}={prints[name]}".encode())
    return digest.hexdigest()


def _stamp_run(step: Step, workdir: Path, inputs: str, fingerprint: str,
               log: Callable[[str], None]) -> None:
    """Before (and after) a training step: its run folder holds ``step.json`` with the
    fingerprint of the step's inputs (``inputs``); one stamped with others is moved to
    ``MODEL.run.previous`` first. An unstamped one is judged by the step's marker: its
    ``inputs`` when it has them, else (a marker written before them) its whole ``fingerprint``."""
    if step.output.suffix != ".pt":
        return
    run = step.output.with_suffix(".run")            # trkx.training.fit.run_folder
    stamp = run / "step.json"
    if run.is_dir():
        changed = False
        for source in (stamp, step.marker(workdir)):
            if source.is_file():
                try:
                    record = json.loads(source.read_text())
                except (OSError, json.JSONDecodeError):
                    break
                if "inputs" in record:
                    changed = record["inputs"] != inputs
                else:
                    changed = record.get("fingerprint") not in (None, fingerprint)
                break
        if changed:
            previous = run.with_name(f"{run.name}.previous")
            shutil.rmtree(previous, ignore_errors=True)
            run.rename(previous)
            log(f"{run}: its inputs changed, training afresh (the run trained on the old "
                f"ones is kept in {previous})")
    run.mkdir(parents=True, exist_ok=True)
    _write_json_atomic(stamp, {"step": step.name, "inputs": inputs})


def step_process(argv: Sequence[str], debug: bool = False) -> int:
    """Run ``trkx ARGV`` as ``python -m trkx ARGV`` in a new process (this interpreter, the
    environment inherited: thread count, allocator; ``debug``: TRKX_DEBUG=1, tracebacks);
    its exit status."""
    env = {**os.environ, "TRKX_DEBUG": "1"} if debug else None
    return subprocess.call([sys.executable, "-m", "trkx", *argv], env=env)


def run_steps(steps: Sequence[Step], workdir: Path,
              execute: Callable[[Sequence[str]], int], log: Callable[[str], None] = print,
              ) -> list[StepResult]:
    """Run ``steps`` in order through ``execute(argv) -> exit status``; returns their times."""
    results = []
    prints = fingerprints(steps)
    ran: set[str] = set()
    for index, step in enumerate(steps, start=1):
        header = f"[{index}/{len(steps)}] {step.name}"
        done = _still_done(step, workdir, prints[step.name],
                           bool(ran.intersection(step.inputs)))
        if done is not None:
            log(f"{header}: done before ({done['seconds']:.1f} s), skipped")
            results.append(StepResult(step, float(done["seconds"]), skipped=True))
            continue
        log(f"{header}: trkx {' '.join(step.argv)}")
        inputs = input_fingerprint(step, prints)
        _stamp_run(step, workdir, inputs, prints[step.name], log)
        start = time.perf_counter()
        status = execute(list(step.argv))
        seconds = time.perf_counter() - start
        if status == 130:  # the step was interrupted (Ctrl-C): stop the whole run
            raise KeyboardInterrupt
        if status != 0:
            raise StepFailed(f"step {step.name} failed (exit status {status}): "
                             f"trkx {' '.join(step.argv)}")
        _write_json_atomic(step.marker(workdir), {
            "argv": list(step.argv), "fingerprint": prints[step.name], "inputs": inputs,
            "seconds": seconds, "finished": time.time()})
        ran.add(step.name)
        _stamp_run(step, workdir, inputs, prints[step.name], log)
        log(f"{header}: finished in {seconds:.1f} s")
        results.append(StepResult(step, seconds, skipped=False))
    return results


def seconds_per_stage(results: Sequence[StepResult]) -> dict[str, float]:
    """Total seconds booked under each stage, in first-seen order."""
    totals: dict[str, float] = {}
    for result in results:
        totals[result.step.stage] = totals.get(result.step.stage, 0.0) + result.seconds
    return totals
