"""Atomic file output and safe tensor-file input, shared by every writer in trkx.

``atomic_write(path, write)`` calls ``write(tmp)`` on a temporary file in the destination folder
and renames it over ``path`` only when ``write`` returned: a killed run never leaves a
half-written file. Files get the mode ``open()`` would give them (0o666 less the umask).
``save_tensors``/``load_tensors`` are ``torch.save`` through ``atomic_write`` and
``torch.load(weights_only=True)`` with an error that names the file and, for a file that is no
torch file at all (text, empty, another zip), what it is.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trkx.files.errors import TrackMLFormatError
from trkx.words import with_article


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


class DamagedFileError(TrackMLFormatError):
    """A file written by ``torch.save`` that ``torch.load`` cannot read (truncated, bytes
    changed): unlike a file of another kind, it is worth re-creating."""


#: The first bytes of a pickle (protocol 2 or later): torch.save's legacy, non-zip format.
_PICKLE = b"\x80"
_ZIP = b"PK\x03\x04"


def torch_file_problem(data: bytes) -> str | None:
    """Why a file of bytes ``data`` cannot have been written by ``torch.save`` ("empty file",
    "a text file", "a zip archive without data.pkl" ...), or None when it may have been.

    ``torch.save`` writes a zip archive holding ``NAME/data.pkl`` (a pickle before torch 1.6);
    anything else is named by what it looks like, so the user sees "a text file", not
    torch's "pop from empty list" or a multi-paragraph ``weights_only`` notice.
    """
    import io
    import zipfile

    head = data[:4096]
    if not head:
        return "empty file"
    if head.startswith(_ZIP):
        try:
            with zipfile.ZipFile(io.BytesIO(data)) as archive:
                names = archive.namelist()
        except (zipfile.BadZipFile, OSError, EOFError):
            return None                      # damaged (truncated?): torch.load names it
        if not any(name.endswith("/data.pkl") for name in names):
            shown = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
            return f"a zip archive of {shown or 'nothing'}, not one written by torch.save"
        return None
    if head.startswith(_PICKLE):
        return None
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if len(head) < 4096 or exc.start < len(head) - 4:   # not a character cut at 4096
            return "binary data not written by torch.save"
        text = head[:exc.start].decode("utf-8")
    if "\x00" in text:
        return "binary data not written by torch.save"
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return f"a text file: {first[:40]!r}" if first else "a text file of blank lines"


def _weights_only_refusal(exc: BaseException) -> str | None:
    """The reason of a ``weights_only`` refusal (torch's notice spans paragraphs; the reason is
    its ``WeightsUnpickler error`` sentence), or None for another error."""
    marker = "WeightsUnpickler error:"
    text = str(exc)
    if marker not in text:
        return None
    return text.split(marker, 1)[1].strip().split("\n", 1)[0].split(". ", 1)[0]


def load_tensors(path: str | os.PathLike, what: str, keep: bool = False) -> dict[str, Any]:
    """``torch.load(weights_only=True)`` of a dict written by :func:`save_tensors`, the file
    read once; a file that is none names what it is instead (:func:`torch_file_problem`).
    ``keep``: a small file (a checkpoint) is read once per process
    (trkx.files.read_once)."""
    import io

    from trkx.files.read_once import file_bytes

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such {what}")
    data = file_bytes(path) if keep else path.read_bytes()   # checked, then loaded from memory
    problem = torch_file_problem(data)
    if problem is not None:
        raise TrackMLFormatError(f"{path}: not {with_article(what)} ({problem})")
    import torch

    try:
        payload = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises several types for corrupt or unsafe files
        refused = _weights_only_refusal(exc)
        if refused is not None:
            raise TrackMLFormatError(f"{path}: not {with_article(what)} (holds objects other "
                                     f"than tensors and plain values: {refused})") from exc
        reason = " ".join(str(exc).split()).split(". ", 1)[0] or type(exc).__name__
        raise DamagedFileError(f"{path}: not a readable {what} ({reason})") from exc
    if not isinstance(payload, dict):
        raise TrackMLFormatError(f"{path}: not {with_article(what)} (holds "
                                 f"{with_article(type(payload).__name__)}, not a dict)")
    return payload
