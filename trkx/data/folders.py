"""Checks of input folders that run before any work (and before torch or Lightning is
imported): a missing folder, a folder without events, events without the parts a command needs
(truth to train or evaluate, cells for a model trained with cell features). Each failure is one
line naming the folder or file and the option or config key that gave it."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from trkx.data.listing import event_prefixes
from trkx.files.errors import EventFileNotFoundError

#: What each part is called in messages ("training needs truth files").
PART_NAMES = {"hits": "hit", "cells": "cell", "particles": "particle", "truth": "truth"}


def require_folder(path: str | os.PathLike, key: str, what: str = "folder") -> Path:
    """``path`` as a Path; FileNotFoundError (NotADirectoryError for a file) naming ``key``."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such {what} ({key})")
    if not path.is_dir():
        raise NotADirectoryError(f"{path}: not a folder ({key})")
    return path


def require_writable_folder(path: str | os.PathLike, key: str) -> Path:
    """``path`` as a Path, a folder that exists or can be made (its nearest existing ancestor a
    writable folder), checked without making it; NotADirectoryError or PermissionError naming
    ``key`` otherwise."""
    path = Path(path)
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        where = "" if existing == path else f" (its parent {existing} is a file)"
        raise NotADirectoryError(f"{path}: cannot be made a folder{where} ({key})")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise PermissionError(f"{path}: cannot be written ({existing} is not writable; {key})")
    return path


def has_part(prefix: str, part: str) -> bool:
    return any(Path(f"{prefix}-{part}.csv{gz}").is_file() for gz in ("", ".gz"))


def require_parts(prefixes: Sequence[str], parts: Iterable[str], need: str, key: str,
                  hint: str = "") -> None:
    """Fail naming the first missing file when an event of ``prefixes`` lacks one of
    ``parts``: "``need`` truth files: DIR/event...-truth.csv[.gz] missing (KEY; 3 of 5 events
    have none)", then ``hint``."""
    for part in parts:
        lacking = [prefix for prefix in prefixes if not has_part(prefix, part)]
        if lacking:
            raise EventFileNotFoundError(
                f"{need} {PART_NAMES.get(part, part)} files: {lacking[0]}-{part}.csv[.gz] "
                f"missing ({key}; {len(lacking)} of {len(prefixes)} event(s) have none)"
                + (f"; {hint}" if hint else ""))


def require_trackml_events(folder: str | os.PathLike, key: str,
                           what: str = "events folder") -> list[str]:
    """The event prefixes of ``folder``, which must exist and hold TrackML hit files."""
    folder = require_folder(folder, key, what)
    prefixes = [p for p in event_prefixes(folder) if has_part(p, "hits")]
    if not prefixes:
        raise FileNotFoundError(f"{folder}: no TrackML events (event*-hits.csv[.gz]) ({key})")
    return prefixes
