"""The committed training state of a recipe: what lets a long training continue on a fresh clone.

A training that runs in many stretches (the pile-up-200 models) keeps, in the repository,
the resumable state of each stage's Lightning run folder ``W/checkpoints/STAGE.run``:

    STATE/STAGE/last.ckpt      weights, optimiser, schedule, step, loop and callback state
                               (its paths, e.g. the best-model callback's, under ``{workdir}``)
    STATE/STAGE/best.ckpt      the best validated weights so far (what the stage exports)
    STATE/STAGE/config.json    the run's resume key (trkx.training.fit), with the work folder
                               written as ``{workdir}``
    STATE/STAGE/logs/          the learning curves so far (Lightning CSV logs, one folder per
                               stretch)

``STATE`` is the pipeline's ``state.folder`` (relative to the pipeline file).
``trkx run CONFIG --workdir W --save-state`` writes it from ``W`` (each stage folder replaced
whole, built beside it and renamed: nothing half-written); every ``trkx run CONFIG --workdir W``
first restores it into a ``W`` whose stage has no ``last.ckpt`` of its own. The training then
resumes from that step when the stage's config is the one that wrote the state (the resume
key's check) and starts afresh otherwise. Data are not stored: simulated events are made again
from the recipe's seed, and the records of each later stage from the restored earlier stage.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trkx.config import ConfigError
from trkx.pipeline.config import STAGE_NAMES, PipelineConfig, resolve_relative
from trkx.training.trainer import BEST, LAST

#: Stand-in for the work folder in a stored resume key.
WORKDIR_MARK = "{workdir}"
CONFIG_FILE = "config.json"
STATE_FILES: tuple[str, ...] = (LAST, f"{BEST}.ckpt", CONFIG_FILE)


class StateError(ConfigError):
    """The recipe has no state folder, or the work folder has nothing to save."""


def state_folder(config: PipelineConfig) -> Path | None:
    """The recipe's state folder (None: the recipe keeps no state)."""
    folder = config.state.folder
    return None if folder is None else resolve_relative(folder, config.path.parent)


def run_folder(workdir: Path, stage: str) -> Path:
    """The Lightning run folder of ``stage`` in the work folder (trkx.training.fit)."""
    return Path(workdir) / "checkpoints" / f"{stage}.run"


def _map_strings(value: Any, change: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return change(value)
    if isinstance(value, list):
        return [_map_strings(item, change) for item in value]
    if isinstance(value, dict):
        return {_map_strings(key, change): _map_strings(item, change)
                for key, item in value.items()}
    return value


def _prefix_change(olds: tuple[str, ...], new: str) -> Callable[[str], str]:
    """Replace a leading path ``old`` (any of ``olds``) of a string by ``new``."""
    def change(item: str) -> str:
        for old in olds:
            stem = old.rstrip("/")
            if item == stem or item.startswith(stem + "/"):
                return new + item[len(stem):]
        return item
    return change


def _rewrite_key(text: str, olds: tuple[str, ...], new: str) -> str:
    """The resume key ``text`` with every path string that starts with one of ``olds``
    starting with ``new`` instead (dumped as trkx.training.fit dumps it)."""
    return json.dumps(_map_strings(json.loads(text), _prefix_change(olds, new)),
                      sort_keys=True, default=str)


def _copy_last(source: Path, target: Path, olds: tuple[str, ...], new: str) -> None:
    """Copy ``last.ckpt`` with the paths in its callbacks' state (the best-model callback's
    folder and files, which Lightning checks on resume) moved from ``olds`` to ``new``."""
    import torch

    state = torch.load(source, map_location="cpu", weights_only=True)
    state["callbacks"] = _map_strings(state.get("callbacks", {}), _prefix_change(olds, new))
    torch.save(state, target)


def _workdir_names(workdir: Path) -> tuple[str, ...]:
    """How paths under ``workdir`` are written: resolved (Lightning's callback state),
    absolute (the resume key's data folders, trkx.training.fit._resume_key) and as given."""
    return (os.path.realpath(workdir), os.path.abspath(workdir), str(workdir))


def save_state(config: PipelineConfig, workdir: Path) -> dict[str, int]:
    """Copy the resumable state of every trained stage of ``workdir`` into the recipe's state
    folder; returns ``stage -> bytes written``."""
    folder = state_folder(config)
    if folder is None:
        raise StateError(f"{config.path}: no state.folder: the recipe keeps no training state")
    written: dict[str, int] = {}
    for stage in STAGE_NAMES:
        run = run_folder(workdir, stage)
        if not (run / LAST).is_file() or not (run / CONFIG_FILE).is_file():
            continue
        folder.mkdir(parents=True, exist_ok=True)
        build = Path(tempfile.mkdtemp(prefix=f".{stage}.", dir=folder))
        try:
            build.chmod(0o755)
            _copy_last(run / LAST, build / LAST, _workdir_names(workdir), WORKDIR_MARK)
            if (run / f"{BEST}.ckpt").is_file():
                shutil.copyfile(run / f"{BEST}.ckpt", build / f"{BEST}.ckpt")
            key = _rewrite_key((run / CONFIG_FILE).read_text(), _workdir_names(workdir),
                               WORKDIR_MARK)
            (build / CONFIG_FILE).write_text(key)
            if (run / "logs").is_dir():
                shutil.copytree(run / "logs", build / "logs")
            target = folder / stage
            if target.exists():
                shutil.rmtree(target)
            build.rename(target)
        except BaseException:
            shutil.rmtree(build, ignore_errors=True)
            raise
        written[stage] = sum(f.stat().st_size for f in target.rglob("*") if f.is_file())
    if not written:
        raise StateError(f"{workdir}: no stage has a last.ckpt in checkpoints/STAGE.run: "
                         "nothing to save (run `trkx run` first)")
    return written


def restore_state(config: PipelineConfig, workdir: Path) -> list[str]:
    """Copy the recipe's stored state into every stage run folder of ``workdir`` that has no
    ``last.ckpt``; returns the stages restored."""
    folder = state_folder(config)
    restored: list[str] = []
    if folder is None:
        return restored
    for stage in STAGE_NAMES:
        stored, run = folder / stage, run_folder(workdir, stage)
        if not (stored / LAST).is_file() or (run / LAST).is_file():
            continue
        build = run.with_name(f".{run.name}.restoring")
        shutil.rmtree(build, ignore_errors=True)
        shutil.copytree(stored, build)
        key = _rewrite_key((stored / CONFIG_FILE).read_text(), (WORKDIR_MARK,), str(workdir))
        (build / CONFIG_FILE).write_text(key)
        _copy_last(stored / LAST, build / LAST, (WORKDIR_MARK,), os.path.realpath(workdir))
        if run.exists():
            shutil.rmtree(run)
        build.rename(run)
        restored.append(stage)
    return restored
