"""Checks of the user's inputs that run before any step of ``trkx run`` or ``trkx infer``, so
that a wrong folder or file fails at once with one line, before the heavy imports (torch,
Lightning) and before anything is written."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path


def check_checkpoints(paths: Mapping[str, Path]) -> None:
    """Read and verify every checkpoint (format, stage, checksum), ``{stage: path}``, before
    any event runs or any worker starts: a bad file fails here, not after the progress bar."""
    from trkx.checkpoint import load_checkpoint

    for stage, path in paths.items():
        load_checkpoint(path, stage)
