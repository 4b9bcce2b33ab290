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


def own_peak_memory_gb() -> float:
    """This process's largest resident memory (GiB) since it started or since
    :func:`reset_peak_memory`: its address space's high-water mark (``VmHWM`` in
    /proc/self/status on Linux), not ``ru_maxrss``, which also counts the image of whatever
    process forked it before its exec and cannot be reset (the fallback elsewhere)."""
    status = Path("/proc/self/status")
    if status.is_file():
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 2**20          # KiB -> GiB
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def peak_memory_gb() -> float:
    """:func:`own_peak_memory_gb`, or the ``ru_maxrss`` of this process's largest finished
    child (the workers) when larger: an upper bound, since a child's counts the image it was
    forked from."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20
    return max(own_peak_memory_gb(), children)
