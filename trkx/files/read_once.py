"""Small files read once per process: a model set's configs and checkpoints.

``trkx infer`` verifies a shipped set's files against their checksums, then parses its configs
and loads its checkpoints; :func:`file_bytes` keeps the bytes of a file it read (keyed by the
resolved path, modification time and size, so an edited file is read again), so each file is
opened once. Only files up to :data:`MAX_CACHED_BYTES` are kept, and only the callers that
read configs and checkpoints use it: event records are read with ``Path.read_bytes``.
"""

from __future__ import annotations

import os
from pathlib import Path

#: Files larger than this are read every time (a model set's largest file is ~1.3 MB).
MAX_CACHED_BYTES = 16 * 2**20
_BYTES: dict[tuple[str, int, int], bytes] = {}


def file_bytes(path: str | os.PathLike) -> bytes:
    """The bytes of the file at ``path``, read once per process while it is unchanged."""
    path = Path(path)
    stat = path.stat()
    key = (str(path.resolve()), stat.st_mtime_ns, stat.st_size)
    data = _BYTES.get(key)
    if data is None:
        data = path.read_bytes()
        if len(data) <= MAX_CACHED_BYTES:
            _BYTES[key] = data
    return data
