"""First graph building of a fresh process: numba compiling (empty cache) vs loading its cache.

    python benchmarks/numba_cache.py [--event PREFIX] [--runs 5] [--threads N] [--bare] \
        [--json PATH]

Each run is a new Python process sharing one numba cache folder (``NUMBA_CACHE_DIR``, a new
temporary folder unless ``--cache-dir``); run 1 finds it empty and compiles, the later runs
should only load. Each process first imports what ``trkx infer`` has imported before its graph
stage (the pipeline, event and track-building modules: torch, torch_geometric, scipy.linalg
and numba with them; ``--bare``: numpy and pandas only) and reads the event's hits. It then
times ``import numba`` (~0 when already imported), the first ``neighbour_table`` (bucket
backend) and the first ``table_to_edges`` on the hit positions (x, y, z in metres, radius
0.05 m, k 32), then the same two calls again (warm), and counts the cache files after the
run. ``first`` includes numba's one-time set-up of its CPU target (its registries, and
scipy.linalg for BLAS when not imported yet), which every process pays on its first compiled
call, cache or not. Wall-clock seconds on whatever else the machine is running; ``first_cpu``
is the CPU time (all threads) of the first two calls, less sensitive to that.
"""

from __future__ import annotations

if __name__ == "__main__":   # trkx's allocator, before torch loads (trkx/allocator.py)
    from trkx.allocator import setup as setup_allocator

    setup_allocator()

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EVENT = REPO.parent / "shared/data/trackml/sample_event/event000000001"


def child(event: str, bare: bool) -> dict[str, float]:
    """Seconds of each step in this (fresh) process."""
    import importlib

    import numpy as np
    import pandas as pd

    sys.path.insert(0, str(REPO))
    if not bare:  # what trkx infer imports before the graph stage
        for name in ("trkx.pipeline.inference", "trkx.data.events", "trkx.tracks.building"):
            importlib.import_module(name)
    from trkx.embedding.graph import inner_to_outer_rank, neighbour_table, table_to_edges

    hits = pd.read_csv(f"{event}-hits.csv.gz")
    points = hits[["x", "y", "z"]].to_numpy(np.float32) / 1000.0
    pos = np.stack([np.hypot(points[:, 0], points[:, 1]),
                    np.arctan2(points[:, 1], points[:, 0]), points[:, 2]], 1)
    rank = inner_to_outer_rank(pos, len(points))
    out: dict[str, float] = {"n_hits": len(points)}

    start = time.perf_counter()
    import numba  # noqa: F401
    out["import_numba"] = time.perf_counter() - start
    cpu = time.process_time()
    for label in ("first", "warm"):
        start = time.perf_counter()
        table = neighbour_table(points, 0.05, 32, "bucket")
        out[f"{label}_search"] = time.perf_counter() - start
        start = time.perf_counter()
        edges = table_to_edges(table, rank)
        out[f"{label}_pairs"] = time.perf_counter() - start
        if label == "first":
            out["first_cpu"] = time.process_time() - cpu
    out["edges"] = edges.shape[1]
    out["first_total"] = out["import_numba"] + out["first_search"] + out["first_pairs"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--event", default=str(EVENT), help="event prefix (hits file)")
    parser.add_argument("--runs", type=int, default=5, help="fresh processes, the first cold")
    parser.add_argument("--cache-dir", type=Path, default=None,
                        help="numba cache folder (default: a new empty one)")
    parser.add_argument("--threads", type=int, default=None, help="NUMBA_NUM_THREADS")
    parser.add_argument("--bare", action="store_true",
                        help="import only numpy and pandas before timing (numba not loaded)")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.event, args.bare)))
        return
    cache = args.cache_dir or Path(tempfile.mkdtemp(prefix="numba_cache_"))
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache)}
    if args.threads:
        env["NUMBA_NUM_THREADS"] = str(args.threads)
    runs = []
    for run in range(1, args.runs + 1):
        result = subprocess.run([sys.executable, __file__, "--child", "--event", args.event,
                                 *(["--bare"] if args.bare else [])],
                                env=env, capture_output=True, text=True, check=True)
        row = json.loads(result.stdout.splitlines()[-1])
        row["cache_files"] = sum(1 for f in cache.rglob("*") if f.is_file())
        runs.append(row)
        print(f"run {run}: import numba {row['import_numba']:.3f} s, first search "
              f"{row['first_search']:.3f} s + pairs {row['first_pairs']:.3f} s "
              f"(total {row['first_total']:.3f} s, CPU {row['first_cpu']:.3f} s), "
              f"warm {row['warm_search']:.3f} + "
              f"{row['warm_pairs']:.3f} s, {row['n_hits']} hits, {row['edges']} edges, "
              f"{row['cache_files']} cache files", flush=True)
    if args.json:
        args.json.write_text(json.dumps({"cache_dir": str(cache), "runs": runs}, indent=1))


if __name__ == "__main__":
    main()
