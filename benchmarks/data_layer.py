"""Benchmark of the data layer and the TrackML score on full-size events.

Times, on this machine: reading one real full-event hit file (kaggle_hits, ~110k hits) with
validation; the TrackML score and the challenge weights on a 110k-hit event with truth, made by
tiling the real sample event (5.5k hits) 20 times with fresh hit and particle ids.
Target: score under 0.5 s for a 110k-hit event.

    python benchmarks/data_layer.py [--data DIR] [--json PATH]
"""

from __future__ import annotations

if __name__ == "__main__":   # trkx's allocator, before torch loads (trkx/allocator.py)
    from trkx.allocator import setup as setup_allocator

    setup_allocator()

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np
import pandas as pd

from trkx.data.io import load_event, read_part
from trkx.data.weights import hit_weights
from trkx.tracks.score import score_event


def best_of(fn, repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def tiled_event(prefix: Path, copies: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    particles, truth = load_event(prefix, ["particles", "truth"])
    truths, tables = [], []
    for k in range(copies):
        t = truth.copy()
        t["hit_id"] += k * 1_000_000
        t.loc[t["particle_id"] != 0, "particle_id"] += k
        p = particles.copy()
        p["particle_id"] += k
        truths.append(t)
        tables.append(p)
    return pd.concat(truths, ignore_index=True), pd.concat(tables, ignore_index=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path(os.environ.get(
        "TRKX_DATA", Path(__file__).resolve().parents[2] / "shared" / "data" / "trackml")))
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()

    hits_file = min((args.data / "kaggle_hits").glob("event*-hits.csv.gz"))
    read_seconds = best_of(lambda: read_part(hits_file, "hits"))
    truth, particles = tiled_event(args.data / "sample_event" / "event000000001", 20)
    rng = np.random.default_rng(0)
    tracks = truth["particle_id"].to_numpy().copy()
    moved = rng.random(len(tracks)) < 0.1
    tracks[moved] = rng.integers(0, 10**9, int(moved.sum()))
    submission = pd.DataFrame({"hit_id": truth["hit_id"], "track_id": tracks})
    score_seconds = best_of(lambda: score_event(truth, submission))
    weight_seconds = best_of(lambda: hit_weights(truth, particles))
    figures = {
        "n_hits": len(truth),
        "read_hits_seconds": read_seconds,
        "score_seconds": score_seconds,
        "weights_seconds": weight_seconds,
        "score": score_event(truth, submission),
    }
    print(f"read + validate {hits_file.name}: {read_seconds:.3f} s")
    print(f"TrackML score, {len(truth):,d} hits: {score_seconds:.3f} s (target < 0.5 s)")
    print(f"challenge weights, {len(truth):,d} hits: {weight_seconds:.3f} s")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
