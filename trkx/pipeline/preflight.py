"""Checks of the user's inputs that run before any step of ``trkx run`` or ``trkx infer``, so
that a wrong folder or file fails at once with one line, before the heavy imports (torch,
Lightning) and before anything is written.

``trkx run`` with ``events.simulate: false`` needs, in ``events.train_dir``, ``val_dir`` and
``test_dir``, TrackML events with truth and particle files: the training and validation events
for the labels, the test events because every run ends by evaluating its tracks against truth
(run a trained pipeline on events without truth with ``trkx infer --config CONFIG --checkpoints
WORKDIR/checkpoints --events DIR --out DIR``). When the embedding's stage config has
``data.use_cells: true`` every split needs cell files too (the ``*_hits_only.yaml`` pipeline
configs are for events without them).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

#: Per split of ``trkx run``: what needs its truth, and what to do about events without it.
TRUTH_NEEDED = {
    "train": ("training needs", "train on events with truth (e.g. `trkx simulate`)"),
    "val": ("validation needs", "validate on events with truth (e.g. `trkx simulate`)"),
    "test": ("evaluating the test events needs",
             "every `trkx run` ends by evaluating its test events; run the trained pipeline "
             "on events without truth with `trkx infer --checkpoints WORKDIR/checkpoints`"),
}


def check_run_events(path: str | os.PathLike, overrides: list[str]) -> None:
    """With ``events.simulate: false``: each of events.train_dir, val_dir and test_dir exists
    and holds TrackML events with truth (and cells when the embedding uses them). Reads only
    the ``events`` section and the embedding's ``data.use_cells``; the full config checks
    follow."""
    from trkx.config import apply_overrides, instantiate, load_config, naming_overrides, section
    from trkx.data.folders import require_parts, require_trackml_events
    from trkx.pipeline.config import EventPlan, resolve_relative

    label = str(path)
    raw = apply_overrides(load_config(path), overrides)
    with naming_overrides(overrides, label):
        plan = instantiate(EventPlan, section(raw, "events", label), f"{label}: events")
    if plan.simulate:
        return
    base = Path(path).parent
    use_cells = embedding_uses_cells(raw, base)
    for split, (need, hint) in TRUTH_NEEDED.items():
        key = f"events.{split}_dir"
        prefixes = require_trackml_events(resolve_relative(getattr(plan, f"{split}_dir"), base),
                                          key)
        require_parts(prefixes, ("truth", "particles"), need, key, hint)
        if use_cells:
            require_parts(prefixes, ("cells",), "the embedding's data.use_cells: true needs",
                          key, "for events without cells use a *_hits_only.yaml pipeline "
                               "config")


def embedding_uses_cells(raw: Mapping[str, Any], base: Path) -> bool:
    """``data.use_cells`` of the embedding's stage config with its overrides (False when the
    config cannot be read: the config checks that follow name why)."""
    from trkx.config import ConfigError, apply_overrides, load_config
    from trkx.pipeline.config import resolve_relative

    stages = raw.get("stages")
    plan = stages.get("embedding") if isinstance(stages, dict) else None
    if not isinstance(plan, dict) or not isinstance(plan.get("config"), str):
        return False
    overrides = plan.get("overrides") or []
    if not (isinstance(overrides, list) and all(isinstance(o, str) for o in overrides)):
        return False
    try:
        config = apply_overrides(load_config(resolve_relative(plan["config"], base)), overrides)
    except ConfigError:
        return False
    data = config.get("data")
    return isinstance(data, dict) and data.get("use_cells") is True


def check_infer_inputs(events: Path | None, out: Path | None, config: Path | None,
                       checkpoints: Path | None, workers: int,
                       graphs: Path | None = None) -> None:
    """Whole-pipeline ``trkx infer``: --events and --out are given, --config and
    --checkpoints both or neither, --workers >= 1; --events holds TrackML events,
    --checkpoints is a folder, --out (and --graphs) can be written."""
    from trkx.config import ConfigError
    from trkx.data.folders import require_folder, require_trackml_events, require_writable_folder

    missing = [name for name, value in (("--events", events), ("--out", out)) if value is None]
    if missing:
        raise ConfigError(f"trkx infer needs a STAGE, or {', '.join(missing)} for the whole "
                          "pipeline")
    if (config is None) != (checkpoints is None):
        given, other = ("--config", "--checkpoints") if checkpoints is None else \
            ("--checkpoints", "--config")
        raise ConfigError(f"trkx infer: {given} needs {other} too (or give neither: the "
                          "models shipped with trkx)")
    if workers < 1:
        raise ConfigError(f"--workers must be >= 1, got {workers} (1: events in this "
                          "process, N > 1: N parallel processes)")
    if events is not None:
        require_trackml_events(events, "--events")
    if checkpoints is not None:
        require_folder(checkpoints, "--checkpoints", "checkpoints folder")
    for folder, key in ((out, "--out"), (graphs, "--graphs")):
        if folder is not None:
            require_writable_folder(folder, key)


def check_checkpoints(paths: Mapping[str, Path]) -> None:
    """Read and verify every checkpoint (format, stage, checksum), ``{stage: path}``, before
    any event runs or any worker starts: a bad file fails here, not after the progress bar."""
    from trkx.files.checkpoint import load_checkpoint

    for stage, path in paths.items():
        load_checkpoint(path, stage)
