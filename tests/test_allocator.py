"""The memory allocator of trkx processes (trkx/runtime/allocator.py): a ``trkx`` child process runs
under the caching allocator that trkx sets up itself, or the one TRKX_ALLOCATOR names, and the
tracks of ``trkx infer`` are the same bytes whichever allocator served the tensors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from trkx.runtime import allocator

pytestmark = [pytest.mark.subprocess,
              pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc, /proc")]


def trkx(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``python -m trkx ARGS`` in a child, with the test's environment less every allocator
    variable (a developer's own LD_PRELOAD or TRKX_ALLOCATOR must not decide the test)."""
    base = {k: v for k, v in os.environ.items()
            if k not in ("LD_PRELOAD", "MALLOC_CONF", allocator.ENV, allocator.REEXEC_GUARD)
            and not k.startswith("MIMALLOC_")}
    return subprocess.run([sys.executable, "-m", "trkx", *args], capture_output=True, text=True,
                          env={**base, "TRKX_THREADS": "1", **(env or {})}, timeout=600)


@pytest.fixture(scope="module")
def small_event(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One simulated pile-up-20 event (seconds to reconstruct with the shipped models)."""
    folder = tmp_path_factory.mktemp("alloc_events")
    done = trkx("simulate", "--out", str(folder), "--n-events", "1", "--pileup", "20",
                "--seed", "31")
    assert done.returncode == 0, done.stderr
    return folder


def infer(events: Path, out: Path, choice: str | None) -> tuple[dict, bytes, str]:
    """``trkx infer`` (shipped models) under ``TRKX_ALLOCATOR=choice`` (None: unset):
    its timing.json, its tracks file and its stderr."""
    env = {} if choice is None else {allocator.ENV: choice}
    done = trkx("infer", "--events", str(events), "--out", str(out), "--no-evaluate", env=env)
    assert done.returncode == 0, done.stderr
    (tracks,) = sorted(out.glob("event*-tracks.csv"))
    return json.loads((out / "timing.json").read_text()), tracks.read_bytes(), done.stderr


@pytest.mark.slow
def test_infer_runs_under_the_caching_allocator_and_gives_the_same_tracks(
        small_event: Path, tmp_path: Path) -> None:
    timing, tracks, _ = infer(small_event, tmp_path / "default", None)
    expected = ("jemalloc" if allocator.jemalloc_library() is not None else
                "mimalloc" if allocator.mimalloc_library() is not None else "glibc")
    assert timing["allocator"] == expected
    assert timing["cpu_seconds"]["user"] > 0
    for choice in ("mimalloc", "off", "glibc"):
        other, other_tracks, _ = infer(small_event, tmp_path / choice, choice)
        if choice == "mimalloc" and allocator.mimalloc_library() is None:
            choice = "glibc"                                  # the fallback, with its notice
        assert other["allocator"] == choice
        assert other_tracks == tracks                # the same bytes, track for track


def test_a_missing_allocator_falls_back_to_glibc_with_one_notice(small_event: Path,
                                                                 tmp_path: Path) -> None:
    """jemalloc where the system has none (the notice names the package), and a preload the
    loader refused (the re-exec guard already set): glibc's caching, never a failure."""
    cases = [({allocator.ENV: "mimalloc", allocator.REEXEC_GUARD: "mimalloc"},
              "did not preload" if allocator.mimalloc_library() else "cmeel-mimalloc")]
    if allocator.jemalloc_library() is None:
        cases.append(({allocator.ENV: "jemalloc"}, "libjemalloc2"))
    for env, words in cases:
        done = trkx("info", str(next(small_event.glob("*-hits.csv.gz"))).replace(
            "-hits.csv.gz", ""), env=env)
        assert done.returncode == 0, done.stderr
        notices = [line for line in done.stderr.splitlines() if line.startswith("trkx: ")]
        assert len(notices) == 1 and words in notices[0] and "glibc" in notices[0]


def test_a_bad_choice_is_one_line_and_exit_2() -> None:
    done = trkx("info", "nowhere/event000000001", env={allocator.ENV: "tcmalloc"})
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "trkx info: error: TRKX_ALLOCATOR='tcmalloc' is not one of auto, mimalloc, jemalloc, "
        "glibc, off"]


def test_preload_environment_keeps_the_users_settings() -> None:
    library = Path("/opt/lib/libmimalloc.so.3")
    env = allocator.preload_environment("mimalloc", library, {
        "LD_PRELOAD": "/x/libfoo.so", "MIMALLOC_PURGE_DELAY": "10"})
    assert env["LD_PRELOAD"] == f"{library}:/x/libfoo.so"
    assert env["MIMALLOC_PURGE_DELAY"] == "10"               # the user's value stays
    assert env["MIMALLOC_ALLOW_THP"] == "0"
    assert env[allocator.REEXEC_GUARD] == "mimalloc"
    again = allocator.preload_environment("mimalloc", library, env)
    assert again["LD_PRELOAD"] == env["LD_PRELOAD"]           # not listed twice


def test_glibc_settings_keep_freed_blocks_for_reuse() -> None:
    """After ``apply_glibc_settings`` a freed 16 MiB block stays resident (the heap serves it
    again), where glibc's default maps and unmaps it: the page faults that cost trkx half
    its time."""
    probe = """
import ctypes, re, sys
from trkx.runtime import allocator
if sys.argv[1] == "set":
    assert allocator.apply_glibc_settings() and allocator.active() == "glibc"
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = (ctypes.c_void_p,)
def rss():
    return int(re.search(r"VmRSS:\\s+(\\d+)", open("/proc/self/status").read()).group(1))
pin = libc.malloc(64 << 10)
block = libc.malloc(16 << 20); ctypes.memset(block, 1, 16 << 20)
before = rss()
libc.free(block)
print(before - rss())
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")
           and k != "LD_PRELOAD"}

    def released_kib(mode: str) -> int:
        out = subprocess.run([sys.executable, "-c", probe, mode], capture_output=True,
                             text=True, env=env, check=True).stdout
        return int(out.split()[-1])

    assert released_kib("default") > 15 * 1024           # unmapped at once
    assert released_kib("set") < 1024                     # kept for the next request
