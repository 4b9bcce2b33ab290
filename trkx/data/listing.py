"""What an events folder holds: TrackML events (by prefix) and saved event records (files).

A TrackML event is named by its prefix ``folder/eventNNNNNNNNN`` (its parts are
``{prefix}-{hits,cells,particles,truth}.csv[.gz]``); a saved event record is a ``*.pt`` file
written by :func:`trkx.data.record.save_record`, by the stages ``eventNNNNNNNNN.pt``. Listing
imports neither torch nor pandas, so the checks of input folders run before the heavy imports.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

RECORD_PATTERN = "*.pt"
_EVENT_NUMBER = re.compile(r"event(\d+)")


def event_prefixes(folder: str | os.PathLike) -> list[str]:
    """The sorted event prefixes (``folder/eventNNNNNNNNN``) of the TrackML files in
    ``folder``."""
    from trkx.data.io import list_event_prefixes

    return list_event_prefixes(str(p) for p in sorted(Path(folder).iterdir()))


def record_paths(folder: str | os.PathLike, pattern: str = RECORD_PATTERN,
                 allow_empty: bool = False) -> list[Path]:
    """The files matching ``pattern`` (event records) in ``folder``, sorted by name.

    FileNotFoundError naming the folder when it is not a folder, and when no file matches
    unless ``allow_empty`` (then ``[]``: "does this folder hold records?")."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder}: no such folder of event records")
    paths = sorted(folder.glob(pattern))
    if not paths and not allow_empty:
        raise FileNotFoundError(f"{folder}: no event records matching {pattern!r}")
    return paths


def record_event_id(path: str | os.PathLike) -> int:
    """The event number in a record file's name (``event000001000.pt`` -> 1000); -1 when the
    name has none."""
    match = _EVENT_NUMBER.search(Path(path).stem)
    return int(match.group(1)) if match else -1
