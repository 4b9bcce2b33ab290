"""Track files, as ``trkx build-tracks``, ``trkx infer`` and ``trkx evaluate`` read and write
them: finding event records and track files, reading them with clear errors, and atomic writes
(temporary file in the destination folder, then ``os.replace``).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from trkx.config import apply_overrides, instantiate, load_config, section
from trkx.files.atomic import atomic_write
from trkx.files.errors import TrackMLFormatError

TRACKS_FILE = re.compile(r"^event(\d{9})-tracks\.csv$")


def tracks_file_name(event_id: int) -> str:
    return f"event{int(event_id):09d}-tracks.csv"


def config_section(config_path: str | None, overrides: list[str], name: str, target, label):
    """Instantiate ``target`` from section ``name`` of the config with ``--set`` overrides."""
    config = load_config(config_path) if config_path else {}
    config = apply_overrides(config, overrides or [])
    return instantiate(target, section(config, name, label), f"{label}: {name}")


def track_files(folder: Path) -> dict[int, Path]:
    """``{event_id: path}`` of the ``eventNNNNNNNNN-tracks.csv`` files in ``folder``."""
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder}: no such folder of track files")
    found = {}
    for path in sorted(folder.iterdir()):
        match = TRACKS_FILE.match(path.name)
        if match:
            found[int(match.group(1))] = path
    if not found:
        raise FileNotFoundError(f"{folder}: no eventNNNNNNNNN-tracks.csv files")
    return found


def read_tracks(path: Path, event_id: int) -> pd.DataFrame:
    """The ``hit_id, track_id`` rows of ``event_id`` in a tracks file (checked)."""
    try:
        table = pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise TrackMLFormatError(f"{path}: not a readable CSV file ({exc})") from exc
    for column in ("hit_id", "track_id"):
        if column not in table.columns:
            raise TrackMLFormatError(f"{path}: missing column {column!r} (columns: "
                                     f"{', '.join(map(str, table.columns))})")
    if "event_id" in table.columns:
        events = pd.to_numeric(table["event_id"], errors="coerce").to_numpy()
        wrong = events != event_id
        if wrong.any():
            row = int(np.flatnonzero(wrong)[0])
            raise TrackMLFormatError(f"{path}: line {row + 2} has event_id "
                                     f"{table['event_id'].iloc[row]}, expected {event_id}")
    return table[["hit_id", "track_id"]]


def read_parameters(path: Path) -> pd.DataFrame:
    """A track-parameters file (trkx.tracks.builder.parameters), its columns checked."""
    from trkx.tracks.builder.parameters import COLUMNS

    try:
        table = pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise TrackMLFormatError(f"{path}: not a readable CSV file ({exc})") from exc
    missing = [c for c in COLUMNS if c not in table.columns]
    if missing:
        raise TrackMLFormatError(f"{path}: missing column {missing[0]!r} (a track-parameters "
                                 f"file has {', '.join(COLUMNS)})")
    return table


def find_event_source(folder: Path, event_id: int) -> Path:
    """The record ``event{id}*.pt``, else the TrackML prefix ``event{id}``, in ``folder``."""
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder}: no such folder of events")
    name = f"event{int(event_id):09d}"
    records = sorted(folder.glob(f"{name}*.pt"))
    if len(records) == 1:
        return records[0]
    if len(records) > 1:
        raise TrackMLFormatError(f"{folder}: several records for event {event_id}: "
                                 f"{', '.join(p.name for p in records)}")
    if list(folder.glob(f"{name}-truth.csv*")):
        return folder / name
    raise FileNotFoundError(f"{folder}: no record {name}*.pt and no TrackML files "
                            f"{name}-{{hits,particles,truth}}.csv[.gz] for event {event_id}")


__all__ = ["atomic_write", "config_section",
           "find_event_source",
           "read_parameters", "read_tracks", "track_files", "tracks_file_name"]
