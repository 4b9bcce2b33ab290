"""Atomic file output and safe tensor-file input, shared by every writer in trkx.

``atomic_write(path, write)`` calls ``write(tmp)`` on a temporary file in the destination folder
and renames it over ``path`` only when ``write`` returned: a killed run never leaves a
half-written file. Files get the mode ``open()`` would give them (0o666 less the umask).
``save_tensors``/``load_tensors`` are ``torch.save`` through ``atomic_write`` and
``torch.load(weights_only=True)`` with an error that names the file.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trkx.data.errors import TrackMLFormatError


def default_file_mode() -> int:
    """0o666 less the process umask: what ``open()`` gives a new file (mkstemp gives 0600)."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def atomic_write(path: str | os.PathLike, write: Callable[[Path], None]) -> Path:
    """Call ``write(tmp)`` on a temporary file beside ``path``, then rename it into place."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        os.chmod(tmp, default_file_mode())
        write(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def save_tensors(payload: dict[str, Any], path: str | os.PathLike) -> Path:
    """``torch.save`` a dict of tensors and plain values atomically."""
    import torch

    return atomic_write(path, lambda tmp: torch.save(payload, tmp))


def load_tensors(path: str | os.PathLike, what: str) -> dict[str, Any]:
    """``torch.load(weights_only=True)`` of a dict written by :func:`save_tensors`."""
    import torch

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such {what}")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises several types for corrupt or unsafe files
        raise TrackMLFormatError(f"{path}: not a readable {what} ({exc})") from exc
    if not isinstance(payload, dict):
        raise TrackMLFormatError(f"{path}: not a {what} (expected a dict)")
    return payload
