"""Resident memory of this process, read from /proc/self/status (Linux), for the benchmarks.

``VmRSS`` is the resident set now, ``VmHWM`` its high-water mark; writing 5 to
/proc/self/clear_refs resets the mark, so a peak can be measured over one stretch of work.
"""

from __future__ import annotations

import re
from pathlib import Path


def _status_kib(key: str) -> int:
    return int(re.search(rf"{key}:\s+(\d+)", Path("/proc/self/status").read_text()).group(1))


def rss_kib() -> int:
    return _status_kib("VmRSS")


def peak_rss_kib() -> int:
    return _status_kib("VmHWM")


def reset_peak_rss() -> None:
    Path("/proc/self/clear_refs").write_text("5")


def release_free_heap() -> None:
    """Return freed heap pages to the OS (glibc ``malloc_trim``; nothing under a preloaded
    allocator), so that the resident size before a step counts live data, not what the
    warm-up step freed."""
    import ctypes
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except OSError:
        pass
