"""What a command's process used: CPU seconds and peak resident memory (``timing.json``)."""

from __future__ import annotations

import contextlib
import resource
from pathlib import Path


def process_cpu_seconds() -> dict[str, float]:
    """User and system CPU seconds of this process and its finished children (the workers)."""
    own, kids = (resource.getrusage(who) for who in (resource.RUSAGE_SELF,
                                                     resource.RUSAGE_CHILDREN))
    return {"user": own.ru_utime + kids.ru_utime, "system": own.ru_stime + kids.ru_stime}


def reset_peak_memory() -> None:
    """Start this process's high-water mark afresh (Linux: ``5`` to /proc/self/clear_refs), so
    that :func:`peak_memory_gb` is one command's own, not that of the training steps ``trkx
    run`` ran before it in the same process. Elsewhere nothing happens."""
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")


def peak_memory_gb() -> float:
    """The largest resident memory (GiB) of this process since it started or since
    :func:`reset_peak_memory`, or of one of its finished children (the workers) when larger.
    This process's own is its address space's high-water mark (``VmHWM`` in /proc/self/status
    on Linux), not ``ru_maxrss``, which also counts the image of whatever process forked it
    before its exec and cannot be reset; a child's is its ``ru_maxrss``, an upper bound for
    the same reason."""
    own = None
    status = Path("/proc/self/status")
    if status.is_file():
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                own = int(line.split()[1])        # KiB
    if own is None:
        own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(own, kids) / 2**20
