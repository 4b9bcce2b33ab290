"""numba's disk cache serves a second process: nothing recompiled, no new cache file.

Every kernel is compiled with ``cache=True``. numba keys a cached function by signature, CPU,
bytecode and a pickle of its closure variables; a kernel that holds another dispatcher in a
closure cell gets a new key in every process (a dispatcher pickles with a per-process id), so
it recompiles each time and adds a cache file. Two child processes share one empty
``NUMBA_CACHE_DIR``: the first compiles, the second must only load.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Runs the bucket search, the pair extraction, the filter's edge features, the GNN's
#: agreements, the component labels and the walkthrough on small inputs; prints
#: {dispatcher: [cache hits, cache misses]} for every kernel involved.
CHILD = """
import json
import numpy as np
from trkx.embedding import bucket_kernels
from trkx.embedding.bucket_search import bucket_neighbours, unique_directed_pairs
from trkx.tracks.builder import components, walkthrough
from trkx.tracks.builder.graph import ScoredGraph

points = np.random.default_rng(0).random((300, 4)).astype(np.float32)
table = bucket_neighbours(points, 0.3, 6, bucket=16)
edges = unique_directed_pairs(table, np.arange(300))
assert edges.shape[0] == 2 and edges.shape[1] > 0
# 0 -> {1, 2} -> 3 with 1, 2 on one layer, and 4 -> 5: a branching component and a chain.
graph = ScoredGraph(6, np.array([0, 0, 1, 2, 4]), np.array([1, 2, 3, 3, 5]),
                    np.array([0.9, 0.8, 0.9, 0.8, 0.9]), np.arange(6),
                    np.array([0, 1, 1, 2, 0, 1]))
labels = walkthrough.walkthrough_tracks(graph, 0.5)
assert len(set(labels[:4])) == 1 and labels[4] == labels[5] != labels[0], labels
# the filter's edge features (cells and trajectory columns) and the GNN's agreements
import torch
from trkx.edges import agreement_kernels
from trkx.data.features import CELL_FEATURES, POSITION_FEATURES
from trkx.edges.agreement import both_agreements
from trkx.filter import feature_kernels
from trkx.filter.features import edge_features
generator = torch.Generator().manual_seed(0)
pos = torch.stack([torch.rand(60, generator=generator) * 900 + 30,
                   torch.rand(60, generator=generator) * 6 - 3,
                   torch.randn(60, generator=generator) * 300], dim=1)
pairs = torch.randint(0, 60, (2, 400), generator=generator)
features = edge_features(torch.rand(60, 11, generator=generator), pos, pairs,
                         [*POSITION_FEATURES, *CELL_FEATURES], 9, True)
assert features.shape == (400, 29)
assert both_agreements(pos, pairs).shape == (400, 4)
kernels = {f"bucket_kernels.{name}": value for name, value in vars(bucket_kernels).items()
           if hasattr(value, "stats") and hasattr(value, "py_func")}
kernels["feature_kernels.fill_edge_features"] = feature_kernels.fill_edge_features
kernels["agreement_kernels.agreements"] = agreement_kernels.agreements
kernels["components"] = components._KERNEL
kernels.update({f"walkthrough.{k.py_func.__name__}": k for k in walkthrough._KERNELS})
print(json.dumps({name: [sum(k.stats.cache_hits.values()), sum(k.stats.cache_misses.values())]
                  for name, k in kernels.items()}))
"""

#: The kernels the child calls from Python (their callees are linked into them).
CALLED = {"bucket_kernels.covariance", "bucket_kernels.rotate", "bucket_kernels.build_buckets",
          "bucket_kernels.boxes", "bucket_kernels.search", "bucket_kernels.keep_once",
          "bucket_kernels.sorted_pairs", "components", "walkthrough._sorted_out_edges",
          "walkthrough._walk", "walkthrough._attach_leftovers",
          "feature_kernels.fill_edge_features", "agreement_kernels.agreements"}


def run_child(cache: Path) -> dict[str, list[int]]:
    """{kernel: [cache hits, cache misses]} of one fresh process using ``cache``."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache), "PYTHONPATH": path}
    out = subprocess.run([sys.executable, "-c", CHILD], env=env, cwd=ROOT, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.splitlines()[-1])


def cache_files(cache: Path) -> dict[str, int]:
    """Every file under ``cache`` (relative name) with its size."""
    return {str(f.relative_to(cache)): f.stat().st_size for f in cache.rglob("*") if f.is_file()}


@pytest.mark.subprocess
@pytest.mark.skipif(importlib.util.find_spec("numba") is None, reason="numba not installed")
def test_second_process_loads_every_kernel_and_writes_nothing(tmp_path: Path) -> None:
    first = run_child(tmp_path)
    files = cache_files(tmp_path)
    assert CALLED <= set(first)
    assert all(first[name][1] >= 1 for name in CALLED)      # empty cache: all compiled
    assert any(name.endswith(".nbc") for name in files)

    second = run_child(tmp_path)
    assert {name: misses for name, (_, misses) in second.items() if misses} == {}
    assert all(second[name][0] >= 1 for name in CALLED)     # each loaded from disk
    assert cache_files(tmp_path) == files                   # same names, count and sizes
