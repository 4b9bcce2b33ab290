"""`trkx infer --workers N`: events in parallel processes give the tracks of the in-process
loop byte for byte; timing.json reports the throughput; bad input is one line, exit 2."""

from __future__ import annotations

import gzip
import json
import os
import shutil
from pathlib import Path

import pytest
import torch

from trkx.cli import main as trkx_main

pytestmark = pytest.mark.slow    # the session's tiny_run trains a pipeline


@pytest.fixture(scope="module")
def events(tiny_run: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Hits files (no truth: no evaluation step) of the tiny run's four simulated events."""
    _, workdir = tiny_run
    folder = tmp_path_factory.mktemp("events")
    for path in sorted((workdir / "data").glob("*/event*-hits.csv.gz")):
        shutil.copy(path, folder / path.name)
    assert len(list(folder.iterdir())) == 4
    return folder


@pytest.fixture
def threads(monkeypatch: pytest.MonkeyPatch):
    """``trkx_main`` sets the thread variables and torch's pool: undo both after the test."""
    for name in ("TRKX_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.setenv(name, os.environ.get(name, "1"))
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def infer(tiny_run: tuple[Path, Path], events: Path, out: Path, *extra: str) -> int:
    config, workdir = tiny_run
    return trkx_main([*extra[:2], "infer", "--config", str(config), "--checkpoints",
                      str(workdir / "checkpoints"), "--events", str(events), "--out", str(out),
                      *extra[2:]])


@pytest.mark.subprocess
def test_workers_write_the_tracks_of_the_single_process_loop(
        tiny_run: tuple[Path, Path], events: Path, tmp_path: Path, threads,
        capsys: pytest.CaptureFixture) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    # one thread per event computation in both runs (2 threads // 2 workers), so the float
    # results cannot differ by a thread-dependent summation order
    assert infer(tiny_run, events, one, "--threads", "1", "--workers", "1") == 0
    assert infer(tiny_run, events, two, "--threads", "2", "--workers", "2") == 0
    names = sorted(p.name for p in one.glob("event*-tracks.csv"))
    assert len(names) == 4
    fitted = [name.replace("-tracks.csv", "-parameters.csv") for name in names]
    assert sorted(p.name for p in two.iterdir()) == sorted([*names, *fitted, "timing.json"])
    for name in [*names, *fitted]:
        assert (one / name).read_bytes() == (two / name).read_bytes(), name
    for out, workers in ((one, 1), (two, 2)):
        timing = json.loads((out / "timing.json").read_text())
        assert timing["workers"] == workers
        assert timing["threads_per_worker"] == 1          # 2 threads split over 2 workers
        assert sorted(f"event{int(e):09d}-tracks.csv" for e in timing["events"]) == names
        assert timing["wall_seconds"] > 0
        assert timing["events_per_second"] == pytest.approx(4 / timing["wall_seconds"])
    # the workers' memory adds up: this process (the single-process run's peak) and two
    # workers, each with torch and the models (over 0.1 GB each: 0.14-0.15 GB measured, so a
    # figure that counted one process alone would fall short)
    peaks = [json.loads((out / "timing.json").read_text())["peak_memory_gb"]
             for out in (one, two)]
    assert peaks[1] > peaks[0] + 2 * 0.1
    last = capsys.readouterr().out.strip().splitlines()[-1]
    rate = json.loads((two / "timing.json").read_text())["events_per_second"]
    assert f"{rate:.2f} events/s with 2 worker(s) of 1 thread(s)" in last


@pytest.mark.parametrize("workers", ["0", "-3"])
def test_workers_below_one_is_one_line(tiny_run: tuple[Path, Path], events: Path,
                                       tmp_path: Path, workers: str,
                                       capsys: pytest.CaptureFixture) -> None:
    assert infer(tiny_run, events, tmp_path / "out", "--threads", "1", "--workers",
                 workers) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"trkx infer: error: --workers must be >= 1, got {workers} (1: events in "
                   "this process, N > 1: N parallel processes)"]
    assert not (tmp_path / "out").exists()


@pytest.mark.subprocess
def test_a_bad_event_in_a_worker_is_one_line_and_leaves_no_partial_file(
        tiny_run: tuple[Path, Path], events: Path, tmp_path: Path, threads,
        capsys: pytest.CaptureFixture) -> None:
    bad_events = tmp_path / "events"
    shutil.copytree(events, bad_events)
    bad = sorted(bad_events.iterdir())[1]
    bad.write_bytes(gzip.compress(b"hit_id,x,y\n1,not-a-number,2\n"))
    out = tmp_path / "out"
    assert infer(tiny_run, bad_events, out, "--threads", "2", "--workers", "2") == 2
    err = capsys.readouterr().err
    last = err.strip().splitlines()[-1]                     # after the progress bar
    assert last.startswith("trkx infer: error: ") and str(bad) in last, err
    assert "Traceback" not in err
    written = sorted(p.name for p in out.iterdir()) if out.exists() else []
    event = bad.name.split("-")[0]
    assert not [n for n in written if n.startswith(".") or n.startswith(event)
                or n == "timing.json"], written


def test_events_with_truth_are_evaluated_with_the_tuned_tracks_config(
        tiny_run: tuple[Path, Path], tmp_path: Path, threads) -> None:
    # the recipe's tracks config leaves walk_cut null: evaluate takes the run's tuned one
    _, workdir = tiny_run
    out = tmp_path / "out"
    assert infer(tiny_run, workdir / "data" / "test", out, "--threads", "1") == 0
    metrics = json.loads((out / "evaluate" / "metrics.json").read_text())
    assert (metrics["overall"]["n_events"], metrics["overall"]["n_hits"]) == (1, 654)


def test_a_killed_runs_temporary_files_are_removed(tiny_run: tuple[Path, Path], events: Path,
                                                   tmp_path: Path, threads) -> None:
    """A run killed while writing leaves atomic_write's temporaries; the next run into the
    same folder removes them, and writes each event's parameters before its tracks."""
    out = tmp_path / "out"
    out.mkdir()
    stale = [out / ".event000000001-tracks.csv.k1ll3d.tmp",
             out / ".event000000001-parameters.csv.k1ll3d.tmp"]
    for path in stale:
        path.write_text("event_id,hit_id,track_id\n1,1,")
    assert infer(tiny_run, events, out, "--threads", "1", "--n-events", "1") == 0
    assert not any(path.exists() for path in stale)
    tracks = next(out.glob("event*-tracks.csv"))
    parameters = tracks.with_name(tracks.name.replace("-tracks", "-parameters"))
    assert parameters.stat().st_mtime_ns <= tracks.stat().st_mtime_ns
