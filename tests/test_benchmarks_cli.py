"""The benchmark scripts run against the current trkx: every one answers ``--help``, the quick
modes that fit in a test run work, every script and result file is listed in
benchmarks/README.md, and the model benchmarks run on the models of a tiny run.

A script is a ``benchmarks/*.py`` with a ``__main__`` block (the others are helpers the scripts
import), found by glob, so a new benchmark is covered without editing this file. Left out as
too slow for a test (measured on the 2-core development machine): ``sampling.py --quick``
(~55 s) and ``distributed.py --quick`` (~110 s, many gloo processes); benchmarks/README.md
gives the command of each.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
BENCHMARKS = REPO / "benchmarks"


def benchmark_scripts() -> list[Path]:
    return sorted(path for path in BENCHMARKS.glob("*.py")
                  if re.search(r'^if __name__ == "__main__":', path.read_text(), re.M))


def run_benchmark(script: str, *args: str, timeout: float = 300,
                  ) -> subprocess.CompletedProcess[str]:
    """``python benchmarks/SCRIPT ARGS`` on this checkout's trkx, one thread."""
    path = [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path), "TRKX_THREADS": "1",
           "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, str(BENCHMARKS / script), *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_the_scripts_are_found() -> None:
    names = {path.name for path in benchmark_scripts()}
    assert {"graph_construction.py", "inference.py", "physics.py", "tracks.py"} <= names
    assert "harness.py" not in names               # a helper: no __main__ block


def test_every_script_and_result_is_in_the_benchmarks_readme() -> None:
    """benchmarks/README.md names every script, and every file of benchmarks/results/ (or its
    folder) is named there or in the README that quotes it."""
    table = (BENCHMARKS / "README.md").read_text()
    quoted = table + (REPO / "README.md").read_text()
    assert [p.name for p in BENCHMARKS.glob("*.py") if f"`{p.name}`" not in table] == []
    results = BENCHMARKS / "results"
    unquoted = [str(p.relative_to(results)) for p in results.iterdir()
                if p.name not in quoted]
    assert unquoted == []


def test_the_harness_records_command_commit_and_machine(tmp_path: Path) -> None:
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import harness
    finally:
        sys.path.remove(str(BENCHMARKS))
    seconds: dict[str, list[float]] = {}
    for _ in range(3):
        with harness.timed(seconds, "stage"):
            pass
    assert len(seconds["stage"]) == 3 and harness.medians(seconds, skip=1)["stage"] >= 0
    harness.write_json(tmp_path / "out.json", {"figure": np.float32(0.5)})
    written = json.loads((tmp_path / "out.json").read_text())
    assert written["figure"] == 0.5
    assert {"command", "commit", "dirty", "date", "machine"} <= set(written["run"])
    assert written["run"]["machine"]["cores"] >= 1 and harness.peak_rss_kib() > 0


@pytest.mark.subprocess
@pytest.mark.parametrize("script", benchmark_scripts(), ids=lambda path: path.name)
def test_help(script: Path) -> None:
    result = run_benchmark(script.name, "--help", timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.startswith(f"usage: {script.name}"), result.stdout[:500]


def test_the_gpu_script_answers_help_and_refuses_an_unknown_option() -> None:
    """benchmarks/gpu_inference.sh takes a results folder as its argument: --help prints its
    header (it once made a folder named --help), an unknown option is one line, exit 2."""
    script = str(BENCHMARKS / "gpu_inference.sh")
    shown = subprocess.run(["bash", script, "--help"], capture_output=True, text=True,
                           timeout=30)
    assert shown.returncode == 0 and shown.stdout.startswith("GPU check of `trkx infer"), \
        shown.stdout[:300]
    assert "--stage-data" in shown.stdout and "#" not in shown.stdout.splitlines()[0]
    refused = subprocess.run(["bash", script, "--bogus"], capture_output=True, text=True,
                             timeout=30)
    assert refused.returncode == 2
    assert refused.stderr.strip() == \
        "gpu_inference.sh: unknown option --bogus (--help, --stage-data, --report RESULTS)"


@pytest.mark.subprocess
def test_graph_construction_quick_search_on_a_saved_embedding(tmp_path: Path) -> None:
    """``--embedding --quick``: every search candidate but the N^2 FAISS flat scan, timed on
    one embedding, with its recall of the exact graph."""
    rng = np.random.default_rng(0)
    points = rng.normal(size=(3000, 12)).astype(np.float32)
    np.save(tmp_path / "embedding.npy", points / np.linalg.norm(points, axis=1, keepdims=True))
    np.save(tmp_path / "positions.npy", np.stack([rng.uniform(30, 1000, 3000),
                                                  rng.uniform(-3, 3, 3000),
                                                  rng.uniform(-3000, 3000, 3000)], axis=1))
    out = tmp_path / "search.json"
    result = run_benchmark("graph_construction.py", "--embedding",
                           str(tmp_path / "embedding.npy"), "--positions",
                           str(tmp_path / "positions.npy"), "--radius", "0.6",
                           "--max-neighbours", "16", "--threads", "1", "--quick", "--json",
                           str(out))
    assert result.returncode == 0, result.stderr[-2000:]
    figures = json.loads(out.read_text())
    assert figures["hits"] == 3000 and figures["edges"] > 0
    backends = {row["backend"] for row in figures["candidates"]}
    assert {"bucket", "kdtree", "faiss_ivf", "faiss_hnsw"} <= backends
    assert "faiss_flat" not in backends
    assert all(row["recall"] == 1.0 for row in figures["candidates"]
               if row["backend"] in ("bucket", "kdtree"))         # exact searches
    assert figures["best"]["recall"] >= 0.999
    pairs = figures["pipeline_pairs"]        # the same edges both ways (asserted inside)
    assert pairs["edges"] == figures["edges"] and not pairs["other_layers_only"]
    assert pairs["pairs_scan_seconds"] > 0 and pairs["pairs_distance_seconds"] > 0


@pytest.mark.subprocess
def test_tracks_quick(tmp_path: Path, sample_prefix: Path) -> None:
    """tracks.py --quick: every builder on the sample event and a 2-copy overlay, and the
    evaluation seconds (~15 s)."""
    out = tmp_path / "tracks.json"
    result = run_benchmark("tracks.py", "--quick", "--data", str(sample_prefix.parents[1]),
                           "--json", str(out))
    assert result.returncode == 0, result.stderr[-2000:]
    figures = json.loads(out.read_text())
    assert set(figures["builders"]) == {"sample event", "2-copy overlay"}
    assert figures["evaluation"]["evaluate_best_s"] > 0
    assert figures["run"]["command"].startswith("python benchmarks/tracks.py --quick")


@pytest.mark.slow
@pytest.mark.subprocess
def test_model_benchmarks_run_on_the_models_of_a_tiny_run(tiny_run: tuple[Path, Path],
                                                          tmp_path: Path) -> None:
    """physics.py --no-run and graph_construction.py on the config, checkpoints and test
    events of ``trkx run``: what to run after changing a stage."""
    config, workdir = tiny_run
    physics = run_benchmark("physics.py", "--config", str(config), "--workdir", str(workdir),
                            "--no-run", "--no-real", "--json", str(tmp_path / "physics.json"))
    assert physics.returncode == 0, physics.stderr[-2000:]
    figures = json.loads((tmp_path / "physics.json").read_text())
    assert 0.0 <= figures["efficiency"] <= 1.0 and set(figures["stage_efficiency"]) == {
        "embedding", "filter", "gnn"}
    search = run_benchmark(
        "graph_construction.py", "--config", str(config), "--checkpoints",
        str(workdir / "checkpoints"), "--events", str(workdir / "data" / "test"), "--quick",
        "--json", str(tmp_path / "search.json"))
    assert search.returncode == 0, search.stderr[-2000:]
    figures = json.loads((tmp_path / "search.json").read_text())
    assert figures["max_neighbours"] == 32 and figures["best"]["recall"] >= 0.999


def test_gpu_inference_report_counts_the_tracks_that_differ(tmp_path: Path) -> None:
    """gpu_inference.sh --report: per pair of runs, the hits whose track mates differ and the
    tracks (>= 3 hits) of one device only; a failed run is reported, not fatal."""
    import pandas as pd

    hits = np.arange(1, 13)
    for run, tracks in (("gpu", [0, 0, 0, 1, 1, 1, 2, 2, 2, 2, 3, 3]),   # hit 10 moved
                        ("cpu", [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3])):
        folder = tmp_path / f"real-cells-{run}"
        (folder / "evaluate").mkdir(parents=True)
        pd.DataFrame({"event_id": 21001, "hit_id": hits, "track_id": tracks}).to_csv(
            folder / "event000021001-tracks.csv", index=False)
        (folder / "timing.json").write_text(json.dumps({
            "device": "cuda:0" if run == "gpu" else "cpu", "events": {"21001": {}},
            "mean_seconds": {"graph": 0.5, "total": 1.0}, "events_per_second": 1.0}))
        (folder / "evaluate" / "pixel_truth.json").write_text(json.dumps(
            {"efficiency": 0.94, "fake_rate": 0.02}))
    (tmp_path / "status.txt").write_text("real-cells-gpu 0 20\nreal-cells-cpu 0 30\n"
                                         "real-hits-gpu 1 5\n")
    done = subprocess.run(["bash", str(BENCHMARKS / "gpu_inference.sh"), "--report",
                           str(tmp_path)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHON": sys.executable})
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "gpu_inference.json").read_text())
    pair = report["differences"]["real-cells"]["event000021001-tracks.csv"]
    assert pair["hits_in_another_track"] == 3 and pair["tracks_cpu"] == 4
    assert (pair["tracks_only_cpu"], pair["tracks_only_gpu"]) == (2, 1)
    assert not pair["identical_file"]
    assert report["runs"]["real-cells-gpu"]["pixel_truth"]["efficiency"] == 0.94
    assert report["runs"]["real-hits-gpu"]["exit_code"] == 1
    assert "kaggle" not in report["differences"]


@pytest.mark.subprocess
def test_speedup_with_a_bad_baseline_is_one_line_and_leaves_no_worktree() -> None:
    def worktrees() -> str:
        return subprocess.run(["git", "worktree", "list"], cwd=REPO, capture_output=True,
                              text=True).stdout

    before = worktrees()
    done = run_benchmark("speedup.py", "--baseline", "no-such-commit-here", "--repeats", "1")
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("speedup.py: --baseline no-such-commit-here")
    assert worktrees() == before
