"""The benchmark scripts run against the current trkx: every one answers ``--help``, the quick
modes that fit in a test run work, and the stage benchmarks load the models of a tiny run.

A script is a ``benchmarks/*.py`` with a ``__main__`` block (the others are helpers the scripts
import), found by glob, so a new benchmark is covered without editing this file. Left out as
too slow for a test (measured on the 2-core development machine): ``sampling.py --quick``
(~55 s) and ``distributed.py --quick`` (~110 s, many gloo processes).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
BENCHMARKS = REPO / "benchmarks"


def benchmark_scripts() -> list[Path]:
    return sorted(path for path in BENCHMARKS.glob("*.py")
                  if 'if __name__ == "__main__":' in path.read_text())


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
    assert {"filter.py", "graph_construction.py", "inference.py", "physics.py"} <= names
    assert "stage_models.py" not in names          # a helper: no __main__ block


@pytest.mark.subprocess
@pytest.mark.parametrize("script", benchmark_scripts(), ids=lambda path: path.name)
def test_help(script: Path) -> None:
    result = run_benchmark(script.name, "--help", timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.startswith(f"usage: {script.name}"), result.stdout[:500]


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


@pytest.mark.slow
@pytest.mark.subprocess
def test_stage_benchmarks_load_the_models_of_a_tiny_run(tiny_run: tuple[Path, Path],
                                                        tmp_path: Path) -> None:
    """graph_construction.py and filter.py on the checkpoints and test events of ``trkx run``
    (hits only, so the embedding config's cells are switched off as the run did)."""
    _, workdir = tiny_run
    checkpoints, test = workdir / "checkpoints", workdir / "data" / "test"
    embedding = run_benchmark(
        "graph_construction.py", "--checkpoint", str(checkpoints / "embedding.pt"),
        "--test-events", str(test), "--timing-events", str(tmp_path / "none"), "--quick",
        "--threads", "1", "--out", str(tmp_path / "embedding"), "--json",
        str(tmp_path / "embedding.json"))
    assert embedding.returncode == 0, embedding.stderr[-2000:]
    figures = json.loads((tmp_path / "embedding.json").read_text())
    assert figures["test_events"] == 1 and figures["max_neighbours"] == 32  # configs' graph
    assert 0.0 < figures["signal_edge_efficiency"] <= 1.0

    filtered = run_benchmark(
        "filter.py", "--checkpoint", str(checkpoints / "filter.pt"), "--embedding-checkpoint",
        str(checkpoints / "embedding.pt"), "--test-events", str(test), "--out",
        str(tmp_path / "filter"), "--json", str(tmp_path / "filter.json"))
    assert filtered.returncode == 0, filtered.stderr[-2000:]
    figures = json.loads((tmp_path / "filter.json").read_text())
    assert figures["score_cut"] == figures["working_point"]["score_cut"]  # the checkpoint's
    assert figures["stages"]["embedding"]["edges"] >= figures["stages"]["filter"]["edges"] > 0


@pytest.mark.subprocess
def test_gnn_regions_counts_each_regions_kept_signal_and_fakes(tmp_path: Path) -> None:
    """Hits 0-2 in the barrel (volume 8), 3-5 on a disk (volume 9): two barrel signal edges
    (one above 0.5), one barrel fake above 0.5, one endcap signal edge kept and a true
    non-signal endcap edge (counted neither as signal nor as fake)."""
    import torch
    from torch_geometric.data import Data

    from trkx.data.record import save_record

    records = tmp_path / "gnn"
    records.mkdir()
    record = Data(edge_index=torch.tensor([[0, 1, 0, 3, 4], [1, 2, 2, 4, 5]]),
                  scores=torch.tensor([0.9, 0.3, 0.7, 0.6, 0.95]),
                  signal=torch.tensor([True, True, False, True, False]),
                  y=torch.tensor([True, True, False, True, True]),
                  volume_id=torch.tensor([8, 8, 8, 9, 9, 9]), x=torch.zeros(6, 3))
    save_record(record, records / "event000000001.pt")
    out = tmp_path / "regions.json"
    result = run_benchmark("gnn_regions.py", "--records", str(records), "--cuts", "0.5,0.8",
                           "--json", str(out))
    assert result.returncode == 0, result.stderr[-2000:]
    figures = json.loads(out.read_text())["event000000001"]
    assert figures["barrel"]["0.5"] == {"keep": 0.5, "fakes_per_kept": 1.0, "signal_edges": 2}
    assert figures["barrel"]["0.8"] == {"keep": 0.5, "fakes_per_kept": 0.0, "signal_edges": 2}
    assert figures["endcap"]["0.5"] == {"keep": 1.0, "fakes_per_kept": 0.0, "signal_edges": 1}
    assert figures["endcap"]["0.8"]["keep"] == 0.0
    bad = run_benchmark("gnn_regions.py", "--records", str(tmp_path / "none"))
    assert bad.returncode == 2 and "no record files" in bad.stderr
