"""What an events folder holds: TrackML events (by prefix) and saved event records (files).

A TrackML event is named by its prefix ``folder/eventNNNNNNNNN`` (its parts are
``{prefix}-{hits,cells,particles,truth}.csv[.gz]``); a saved event record is a ``*.pt`` file
written by :func:`trkx.data.record.save_record`, by the stages ``eventNNNNNNNNN.pt``
(:func:`output_path`); :func:`remove_stale` clears a reused output folder of an earlier run's
files. Listing imports neither torch nor pandas, so the checks of input folders run before the
heavy imports.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

RECORD_PATTERN = "*.pt"
#: The name of a stage's record of one event.
RECORD_FILE = re.compile(r"^event\d{9}\.pt$")
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


def output_path(event_id: int, out_dir: str | Path) -> Path:
    """Where the record of one event goes."""
    return Path(out_dir) / f"event{int(event_id):09d}.pt"


def remove_stale(out_dir: Path, written: Iterable[Path], pattern: re.Pattern = RECORD_FILE,
                 ) -> int:
    """Delete output files of earlier runs in ``out_dir`` (names matching ``pattern``) that
    this run did not write, so a reused folder holds only this run's outputs."""
    keep = {Path(p).resolve() for p in written}
    stale = [p for p in Path(out_dir).iterdir()
             if pattern.match(p.name) and p.resolve() not in keep]
    for path in stale:
        path.unlink()
    if stale:
        print(f"{out_dir}: removed {len(stale)} file(s) of an earlier run")
    return len(stale)
