"""Benchmark: time to evaluate one full-size (~110k-hit) event. Target: <= 0.5 s.

The event is a ``--copies``-fold phi-rotated overlay of the real sample event (see
``synthetic_scores.replicate_event``), its tracks built by the default walkthrough from
GNN-like scores. Timed: :func:`evaluate_event` (matching, per-track and per-particle tables,
TrackML score) plus :func:`event_summary`, and the binned rates for the plots; best and median
of ``--repeat`` runs (the machine is shared, so the best is the cleanest figure).

    python benchmarks/evaluation.py [--data DIR] [--copies 20] [--repeat 7] [--json out.json]
"""

from __future__ import annotations

if __name__ == "__main__":   # trkx's allocator, before torch loads (trkx/allocator.py)
    from trkx.allocator import setup as setup_allocator

    setup_allocator()

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from synthetic_scores import candidate_graph, gnn_like_scores, replicate_event
from track_building import default_data

from trkx.data.io import load_event
from trkx.data.record import build_event_record
from trkx.tracks.binned import standard_rates
from trkx.tracks.building import TrackBuilder, tracks_frame
from trkx.tracks.event_truth import truth_from_record
from trkx.tracks.metrics import evaluate_event, event_summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=default_data())
    parser.add_argument("--copies", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    prefix = args.data / "sample_event" / "event000000001"
    hits, particles, truth = load_event(prefix, ["hits", "particles", "truth"], detector=None)
    base = build_event_record(hits, None, particles, truth, use_cells=False, event_id=1)
    record = replicate_event(base, args.copies)
    edges = candidate_graph(record)
    scores, _ = gnn_like_scores(record, edges)
    record.edge_index, record.scores = torch.from_numpy(edges), torch.from_numpy(scores)
    start = time.perf_counter()
    labels = TrackBuilder().build(record)
    build_s = time.perf_counter() - start
    submission = tracks_frame(record.hit_id, labels, 1)[["hit_id", "track_id"]]
    event_truth = truth_from_record(record)

    evaluate_times, binned_times = [], []
    for _ in range(args.repeat):
        start = time.perf_counter()
        evaluation = evaluate_event(event_truth, submission)
        summary = event_summary(evaluation)
        evaluate_times.append(time.perf_counter() - start)
        start = time.perf_counter()
        standard_rates(evaluation.particles, evaluation.tracks, 1.0, None, 3)
        binned_times.append(time.perf_counter() - start)
    result = {"n_hits": int(record.num_nodes), "n_tracks_submitted": int(labels.max()) + 1,
              "walkthrough_build_s": build_s,
              "evaluate_best_s": min(evaluate_times),
              "evaluate_median_s": statistics.median(evaluate_times),
              "binned_rates_best_s": min(binned_times),
              "efficiency": summary["efficiency"], "trackml_score": summary["trackml_score"]}
    print(f"{result['n_hits']:,d} hits, {result['n_tracks_submitted']:,d} submitted tracks "
          f"(walkthrough build {build_s:.2f} s)")
    print(f"evaluate_event + summary: best {result['evaluate_best_s']:.3f} s, median "
          f"{result['evaluate_median_s']:.3f} s over {args.repeat} runs (target <= 0.5 s)")
    print(f"binned rates for the plots: best {result['binned_rates_best_s']:.3f} s")
    print(f"efficiency {summary['efficiency']:.4f}, TrackML score "
          f"{summary['trackml_score']:.4f}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
