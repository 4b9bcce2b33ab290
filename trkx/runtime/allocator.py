"""The memory allocator of every trkx process: freed tensor memory stays mapped and is reused.

A pile-up-200 event makes tensors of tens to hundreds of MB (one row per edge). glibc serves
every block above its mmap threshold (at most 32 MiB) with a fresh mapping and unmaps it when
freed, so each page of each such tensor faults in, zero-filled by the kernel, on first touch:
``trkx infer`` and a whole-event training step spent as much system time as arithmetic
(docs/design.md, "Memory allocator"). A caching allocator keeps freed blocks mapped and hands
them out again; the kernel then zero-fills a page once per process instead of once per tensor.

    TRKX_ALLOCATOR = auto (default) | mimalloc | jemalloc | glibc | off

``auto`` takes jemalloc where the system has it, else mimalloc (both measured in
docs/levers.md, "Retired studies"; jemalloc keeps less memory per graph-parallel rank: 0.29 of one
process at P = 4 against mimalloc's 0.35, and trains as fast).

- ``mimalloc``: Microsoft's allocator from the ``cmeel-mimalloc`` wheel, a dependency of trkx
  on Linux (so every fresh install has it). It must replace ``malloc`` before the C libraries
  of torch load, so the process entry (``trkx ...``, ``python -m trkx``, the benchmarks)
  re-executes itself once with ``LD_PRELOAD`` set; the PID, arguments and environment stay,
  and child processes (``trkx run``'s steps, torchrun and spawned ranks, DataLoader workers)
  inherit it. Options
  (each only where the environment does not set it already): ``MIMALLOC_PURGE_DELAY=-1``, freed
  memory is never returned to the OS; ``MIMALLOC_ALLOW_THP=0``, no transparent huge pages, whose
  fault-time zeroing and compaction measured slower on the 2-core machines.
- ``jemalloc``: the system's ``libjemalloc.so.2`` (Debian ``libjemalloc2``), preloaded the same
  way, with ``MALLOC_CONF=background_thread:false,dirty_decay_ms:-1,muzzy_decay_ms:-1``.
- ``glibc``: no preload; glibc's own caching, set in-process with ``mallopt``: mmap threshold at
  its 32 MiB ceiling and the heap top trimmed only past 2 GiB free (``M_TRIM_THRESHOLD``, an
  ``int``), so every block below 32 MiB is reused from the heap. It is the fallback (one line
  on stderr says why) where the preferred allocator is missing or the loader refused it.
- ``off``: the C library's defaults, nothing changed (for measuring).

The choice decides memory reuse only: the arithmetic, and so every output, is identical
(``tests/test_allocator.py`` compares ``trkx infer`` tracks with and without).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
from collections.abc import Sequence
from pathlib import Path

ENV = "TRKX_ALLOCATOR"
#: Set in the environment of a process that trkx re-executed under a preload: it is never
#: re-executed twice, even where the loader refused the library.
REEXEC_GUARD = "TRKX_ALLOCATOR_REEXEC"
CHOICES = ("auto", "mimalloc", "jemalloc", "glibc", "off")
PRELOADED = ("mimalloc", "jemalloc")
#: Allocator options, set only where the environment has not set them.
OPTIONS: dict[str, dict[str, str]] = {
    "mimalloc": {"MIMALLOC_PURGE_DELAY": "-1", "MIMALLOC_ALLOW_THP": "0"},
    "jemalloc": {"MALLOC_CONF": "background_thread:false,dirty_decay_ms:-1,muzzy_decay_ms:-1"},
}
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3      # mallopt parameter numbers (malloc.h)
GLIBC_MMAP_THRESHOLD = 32 << 20                  # glibc's largest allowed threshold (64-bit)
GLIBC_TRIM_THRESHOLD = 2**31 - 1                 # mallopt's largest value: 2 GiB

_glibc_set = False


class AllocatorError(ValueError):
    """A TRKX_ALLOCATOR value that is not one of CHOICES."""


def requested() -> str:
    """The allocator TRKX_ALLOCATOR asks for (``auto`` when unset)."""
    value = os.environ.get(ENV, "").strip().lower() or "auto"
    if value not in CHOICES:
        raise AllocatorError(f"{ENV}={os.environ[ENV]!r} is not one of {', '.join(CHOICES)}")
    return value


def mimalloc_library() -> Path | None:
    """``libmimalloc.so`` of the installed ``cmeel-mimalloc`` wheel, if any."""
    from importlib import metadata

    try:
        files = metadata.files("cmeel-mimalloc") or []
    except metadata.PackageNotFoundError:
        return None
    for file in files:
        if file.name.startswith("libmimalloc.so"):
            path = Path(str(file.locate())).resolve()
            if path.is_file():
                return path
    return None


def jemalloc_library() -> Path | None:
    """The system's ``libjemalloc.so.2``, if the loader can find it."""
    name = ctypes.util.find_library("jemalloc")
    if name is None:
        return None
    for folder in ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64",
                   "/usr/lib", "/usr/local/lib"):
        path = Path(folder) / name
        if path.is_file():
            return path
    return None


def library_of(name: str) -> Path | None:
    return mimalloc_library() if name == "mimalloc" else jemalloc_library()


def mapped_allocator() -> str | None:
    """The preloaded allocator this process runs under (read from /proc/self/maps), if any."""
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return None
    for name in PRELOADED:
        if f"lib{name}.so" in maps:
            return name
    return None


def active() -> str:
    """The allocator in effect now: mimalloc, jemalloc, glibc (trkx's settings) or off."""
    return mapped_allocator() or ("glibc" if _glibc_set else "off")


def apply_glibc_settings() -> bool:
    """glibc's caching (module docstring), in this process; False where the C library is not
    glibc (macOS, musl)."""
    global _glibc_set
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        mallopt = ctypes.CDLL(name).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    _glibc_set = bool(mallopt(M_MMAP_THRESHOLD, GLIBC_MMAP_THRESHOLD)
                      and mallopt(M_TRIM_THRESHOLD, GLIBC_TRIM_THRESHOLD))
    return _glibc_set


def preload_environment(name: str, library: Path,
                        environ: dict[str, str] | None = None) -> dict[str, str]:
    """``environ`` with ``library`` first in LD_PRELOAD and the allocator's options added."""
    env = dict(os.environ if environ is None else environ)
    preload = [p for p in env.get("LD_PRELOAD", "").split(":") if p and p != str(library)]
    env["LD_PRELOAD"] = ":".join([str(library), *preload])
    for key, value in OPTIONS[name].items():
        env.setdefault(key, value)
    env[REEXEC_GUARD] = name
    return env


def notice(message: str) -> None:
    print(f"trkx: {message}", file=sys.stderr, flush=True)


def setup(argv: Sequence[str] | None = None) -> str:
    """Put the requested allocator in place for this process and its children; returns
    :func:`active`'s answer, or does not return (re-executed under the preload).

    ``argv``: the command line to run again, interpreter first; ``sys.orig_argv`` (Python >=
    3.10) by default. Only a process entry may call this: nothing may have run yet that the
    re-executed process would repeat.
    """
    choice = requested()
    if choice == "off":
        return active()
    running = mapped_allocator()
    if running is not None:
        return running
    if choice in ("auto", *PRELOADED):
        name, library = choice, None
        if choice == "auto":
            library = jemalloc_library()
            name = "jemalloc" if library is not None else "mimalloc"
        library = library or library_of(name)
        if library is None:
            hint = ("pip install cmeel-mimalloc" if name == "mimalloc"
                    else "apt-get install libjemalloc2")
            notice(f"{name} not found ({hint}); glibc's heap caching instead "
                   f"({ENV}=glibc silences this)")
        elif os.environ.get(REEXEC_GUARD):
            notice(f"the loader did not preload {library}; glibc's heap caching instead")
        else:
            args = list(sys.orig_argv if argv is None else argv)
            sys.stdout.flush()
            sys.stderr.flush()
            os.execve(sys.executable, [sys.executable, *args[1:]],
                      preload_environment(name, library))
    apply_glibc_settings()
    return active()
