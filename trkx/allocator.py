"""How freed tensor memory goes back to the OS: the glibc malloc setting ``trkx train`` applies.

A training step allocates activations of many sizes and frees them by the end of the backward
pass. glibc serves a request below its mmap threshold from a heap arena (one per allocating
thread, gloo's communication threads included); a freed block stays resident in its arena until
the arena's top can be trimmed. The threshold starts at 128 KiB and *rises* to the size of the
largest mapped block freed so far (up to 32 MiB: glibc's dynamic threshold), so after the first
step most activations of a mid-sized graph block come from arenas, and resident memory follows
the worst mix of blocks an arena ever held instead of the live tensors. A graph-parallel rank
holding 1/P of an event then keeps more than 1/P of one process's peak.

``configure_allocator`` fixes the threshold with ``mallopt(M_MMAP_THRESHOLD, 64 KiB)``, which
also turns the dynamic threshold off: every block of 64 KiB or more is its own mapping, unmapped
when freed, and the peak resident memory of a step follows its live tensors
(``benchmarks/distributed.py`` measures the peak per rank and the step time with and without).

The environment decides first: nothing is changed when ``MALLOC_MMAP_THRESHOLD_`` is set (glibc
read it at start-up) or ``TRKX_ALLOCATOR=glibc``, and nothing can be on a C library other than
glibc (macOS, musl): the call is then skipped.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

MMAP_THRESHOLD = 64 * 1024
M_MMAP_THRESHOLD = -3          # mallopt parameter number (malloc.h)
ENV = "TRKX_ALLOCATOR"


def configure_allocator(threshold: int = MMAP_THRESHOLD) -> bool:
    """Fix glibc's mmap threshold at ``threshold`` bytes; True when it was set."""
    if os.environ.get(ENV, "trkx") == "glibc" or "MALLOC_MMAP_THRESHOLD_" in os.environ:
        return False
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):     # not glibc
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, int(threshold)))
