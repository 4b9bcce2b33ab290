"""The glibc malloc setting of ``trkx train`` (trkx/allocator.py): a freed block of 64 KiB or
more leaves the resident memory, where glibc's dynamic threshold would keep it in the heap."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# 64 MiB in 512 KiB blocks, freed, after one 16 MiB block was mapped and freed (that raises
# glibc's dynamic threshold to 16 MiB, so without the fixed threshold the small blocks come
# from the heap); a live 64 KiB block above them keeps the heap's top from being trimmed.
PROBE = """
import ctypes, re, sys
sys.path.insert(0, {repo!r})
from trkx.allocator import configure_allocator
print("set" if configure_allocator() else "unset")
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = (ctypes.c_void_p,)
def rss():
    return int(re.search(r"VmRSS:\\s+(\\d+)", open("/proc/self/status").read()).group(1))
big = libc.malloc(16 << 20); ctypes.memset(big, 1, 16 << 20); libc.free(big)
blocks = [libc.malloc(512 << 10) for _ in range(128)]
for b in blocks: ctypes.memset(b, 1, 512 << 10)
pin = libc.malloc(64 << 10); ctypes.memset(pin, 1, 64 << 10)
before = rss()
for b in blocks: libc.free(b)
print(before - rss())
"""


def released_kib(env: dict[str, str]) -> tuple[str, int]:
    out = subprocess.run([sys.executable, "-c", PROBE.format(repo=str(REPO))], check=True,
                         capture_output=True, text=True, env=env).stdout.split()
    return out[0], int(out[1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc malloc")
def test_freed_blocks_leave_resident_memory() -> None:
    state, released = released_kib({"PATH": "/usr/bin:/bin"})
    assert state == "set" and released > 60 * 1024          # the 64 MiB went back to the OS
    state, kept = released_kib({"PATH": "/usr/bin:/bin", "TRKX_ALLOCATOR": "glibc"})
    assert state == "unset" and kept < 8 * 1024              # glibc's default kept them
    state, _ = released_kib({"PATH": "/usr/bin:/bin", "MALLOC_MMAP_THRESHOLD_": "131072"})
    assert state == "unset"                                  # the environment decides first
