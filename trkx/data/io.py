"""TrackML event I/O: read, validate and atomically write the four CSV parts of an event.

An event ``prefix`` such as ``data/event000001000`` names up to four files,
``{prefix}-{hits,cells,particles,truth}.csv`` (optionally ``.csv.gz``). ``load_event`` returns
one ``pandas.DataFrame`` per requested part, with the challenge's column names and the dtypes of
:mod:`trkx.data.schema`, as the reference ``trackml`` library does. Unlike the reference reader,
every file is validated, and bad input raises :class:`TrackMLFormatError` naming the file, the
column, the line and the value.
"""

from __future__ import annotations

import gzip
import io
import os
import re
import tempfile
import warnings
import zipfile
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO

import numpy as np
import pandas as pd

from trkx.data.schema import PARTS, SCHEMAS
from trkx.data.validate import validate_event, validate_part
from trkx.files.atomic import default_file_mode
from trkx.files.errors import EventFileNotFoundError, TrackMLFormatError

__all__ = [
    "EventFileNotFoundError",
    "TrackMLFormatError",
    "event_id_from_prefix",
    "find_part_file",
    "iter_events",
    "list_event_prefixes",
    "load_event",
    "read_part",
    "write_event",
]

_EVENT_FILE = re.compile(r"(?:^|.*/)(event\d+)-([a-z]+)\.csv(\.gz)?$")


def event_id_from_prefix(prefix: str | os.PathLike) -> int:
    """The integer event id of a prefix such as ``dir/event000001000`` (-> 1000)."""
    match = re.search(r"event(\d+)$", str(prefix))
    if match is None:
        raise TrackMLFormatError(f"{prefix}: an event prefix must end in 'event' and digits")
    return int(match.group(1))


def find_part_file(prefix: str | os.PathLike, part: str) -> Path:
    """The file holding ``part`` of the event ``prefix`` (``.csv`` or ``.csv.gz``)."""
    if part not in SCHEMAS:
        raise ValueError(f"unknown event part {part!r}; expected one of {', '.join(PARTS)}")
    candidates = [Path(f"{prefix}-{part}.csv"), Path(f"{prefix}-{part}.csv.gz")]
    found = [c for c in candidates if c.is_file()]
    if not found:
        raise EventFileNotFoundError(
            f"{candidates[0]}[.gz]: no such file (event part {part!r} of {prefix})"
        )
    if len(found) > 1:
        raise TrackMLFormatError(f"{prefix}: both {found[0].name} and {found[1].name} exist")
    return found[0]


def read_part(source: str | os.PathLike | IO[bytes], part: str, name: str | None = None,
              *, compression: str = "infer") -> pd.DataFrame:
    """Read and validate one part (``hits``, ``cells``, ``particles`` or ``truth``).

    ``source`` is a path or an open binary file; ``name`` is what error messages call it.
    """
    label = name if name is not None else str(source)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", pd.errors.ParserWarning)
            frame = pd.read_csv(source, header=0, index_col=False, compression=compression,
                                low_memory=False)
    except pd.errors.ParserWarning as exc:
        raise TrackMLFormatError(f"{label}: rows have more fields than the header") from exc
    except FileNotFoundError as exc:
        raise EventFileNotFoundError(f"{label}: no such file") from exc
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, OSError,
            EOFError, zipfile.BadZipFile) as exc:
        raise TrackMLFormatError(f"{label}: not a readable CSV file ({exc})") from exc
    return validate_part(frame, part, label)


def load_event(prefix: str | os.PathLike, parts: Sequence[str] = PARTS, *,
               detector: object | None = "default") -> tuple[pd.DataFrame, ...]:
    """Load the requested parts of one event, validated, in the order of ``parts``.

    Cross-part checks run on what was loaded: truth and cells must refer to known hits, and
    hits must lie on modules of ``detector`` (the packaged TrackML detector by default; pass
    ``None`` to skip that check, e.g. for another geometry).
    """
    frames = {part: read_part(find_part_file(prefix, part), part) for part in parts}
    validate_event(frames, str(prefix), detector=_resolve_detector(detector))
    return tuple(frames[part] for part in parts)


def _resolve_detector(detector: object | None) -> object | None:
    if isinstance(detector, str) and detector == "default":
        from trkx.data.detector import load_detector

        return load_detector()
    return detector


def list_event_prefixes(names: Iterable[str]) -> list[str]:
    """Sorted unique event prefixes (``dir/eventNNNNNNNNN``) among file names."""
    prefixes = set()
    for name in names:
        match = _EVENT_FILE.match(name.replace(os.sep, "/"))
        if match:
            prefixes.add(name[: name.rfind(match.group(1)) + len(match.group(1))])
    return sorted(prefixes)


def iter_events(path: str | os.PathLike, parts: Sequence[str] = PARTS, *, skip: int = 0,
                nevents: int | None = None, detector: object | None = "default",
                ) -> Iterator[tuple]:
    """Yield ``(event_id, *frames)`` for every event in a directory or a ``.zip`` archive.

    Events are visited in prefix order and loaded lazily, one at a time.
    """
    path = Path(path)
    detector = _resolve_detector(detector)
    if path.is_dir():
        prefixes = list_event_prefixes(str(p) for p in sorted(path.iterdir()))
        for prefix in _window(prefixes, skip, nevents):
            yield (event_id_from_prefix(prefix), *load_event(prefix, parts, detector=detector))
    elif path.is_file() and zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
            for prefix in _window(list_event_prefixes(names), skip, nevents):
                frames = {}
                for part in parts:
                    member = _zip_member(names, prefix, part, path)
                    with archive.open(member) as handle:
                        payload = io.BytesIO(handle.read())
                    compression = "gzip" if member.endswith(".gz") else None
                    frames[part] = read_part(payload, part, f"{path}:{member}",
                                             compression=compression)
                validate_event(frames, f"{path}:{prefix}", detector=detector)
                yield (event_id_from_prefix(prefix), *(frames[p] for p in parts))
    else:
        raise EventFileNotFoundError(f"{path}: neither a directory nor a zip archive of events")


def _window(prefixes: list[str], skip: int, nevents: int | None) -> list[str]:
    selected = prefixes[skip:]
    return selected if nevents is None else selected[:nevents]


def _zip_member(names: list[str], prefix: str, part: str, archive: Path) -> str:
    for suffix in (".csv", ".csv.gz"):
        if f"{prefix}-{part}{suffix}" in names:
            return f"{prefix}-{part}{suffix}"
    raise EventFileNotFoundError(f"{archive}: no member {prefix}-{part}.csv[.gz]")


def _format_frame(frame: pd.DataFrame, part: str) -> pd.DataFrame:
    """Columns in schema order with schema dtypes (optional columns kept when present)."""
    schema = SCHEMAS[part]
    columns = [c for c in schema if c in frame.columns]
    return frame[columns].astype({c: schema[c] for c in columns})


def write_event(prefix: str | os.PathLike, *, compress: bool = True,
                detector: object | None = "default", **parts: pd.DataFrame) -> list[Path]:
    """Write the given parts (``hits=...``, ``cells=...``, ...) of one event atomically.

    Every part is validated first (same checks as :func:`load_event`), then written to a
    temporary file in the destination folder, and only when all are written are they renamed
    into place: a failure leaves no partial event behind. Returns the written paths.
    """
    unknown = set(parts) - set(PARTS)
    if unknown:
        raise ValueError(f"unknown event part(s) {sorted(unknown)}; expected {PARTS}")
    if not parts:
        raise ValueError("write_event needs at least one part")
    prefix = Path(prefix)
    event_id_from_prefix(prefix)
    frames = {part: validate_part(frame.reset_index(drop=True), part, f"{prefix}-{part}")
              for part, frame in parts.items()}
    validate_event(frames, str(prefix), detector=_resolve_detector(detector))
    prefix.parent.mkdir(parents=True, exist_ok=True)
    suffix = ".csv.gz" if compress else ".csv"
    staged: list[tuple[Path, Path]] = []
    try:
        for part, frame in frames.items():
            final = Path(f"{prefix}-{part}{suffix}")
            fd, tmp_name = tempfile.mkstemp(prefix=f".{final.name}.", suffix=".tmp",
                                            dir=final.parent)
            os.close(fd)
            tmp = Path(tmp_name)
            os.chmod(tmp, default_file_mode())
            staged.append((tmp, final))
            table = _format_frame(frame, part)
            if not compress:
                table.to_csv(tmp, index=False, float_format="%.9g")
                continue
            # gzip's header holds a time and a name: the epoch and the final file's name, so the
            # same event is the same bytes whenever and wherever it is written
            with open(tmp, "wb") as raw, gzip.GzipFile(final.name[:-3], "wb", 5, raw, 0) as gz, \
                    io.TextIOWrapper(gz, encoding="utf-8", newline="") as text:
                table.to_csv(text, index=False, float_format="%.9g")
        for tmp, final in staged:
            os.replace(tmp, final)
    finally:
        for tmp, _ in staged:
            tmp.unlink(missing_ok=True)
    return [final for _, final in staged]


def frames_equal(left: pd.DataFrame, right: pd.DataFrame, rtol: float = 1e-6) -> bool:
    """True when two frames hold the same columns and values (floats to ``rtol``)."""
    if list(left.columns) != list(right.columns) or len(left) != len(right):
        return False
    for column in left.columns:
        a, b = left[column].to_numpy(), right[column].to_numpy()
        if np.issubdtype(a.dtype, np.floating):
            if not np.allclose(a, b, rtol=rtol, atol=0, equal_nan=True):
                return False
        elif not np.array_equal(a, b):
            return False
    return True
