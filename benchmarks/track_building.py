"""Benchmark: connected components vs walkthrough on truth-graph-plus-noise edge scores.

Events: the real TrackML sample event (5.5k hits) and a full-size overlay of ``--copies``
phi-rotated copies of it (~110k hits at ``--copies 20``). Edges and scores come from
``synthetic_scores`` (truth graph with 2% lost, k = 6 (eta, phi) neighbours per hit,
GNN-like Beta scores). Every builder is scored with double-majority matching, signal = pT >= 1
GeV and >= 3 hits, candidate tracks >= 3 hits, and the TrackML score.

    python benchmarks/track_building.py [--data DIR] [--copies 20] [--json out.json]
"""

from __future__ import annotations

if __name__ == "__main__":   # trkx's allocator, before torch loads (trkx/allocator.py)
    from trkx.allocator import setup as setup_allocator

    setup_allocator()

import argparse
import json
import os
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from synthetic_scores import candidate_graph, gnn_like_scores, replicate_event

from trkx.data.io import load_event
from trkx.data.record import build_event_record
from trkx.tracks.building import TrackBuilder, tracks_frame
from trkx.tracks.event_truth import truth_from_record
from trkx.tracks.graph import graph_from_record
from trkx.tracks.metrics import evaluate_event, event_summary

BUILDERS = [TrackBuilder("components", cc_cut=c) for c in (0.3, 0.5, 0.7, 0.8, 0.9)] + [
    TrackBuilder("walkthrough", walk_cut=c, max_layer_hits=m)
    for c in (0.1, 0.3, 0.5) for m in (1, 2, 3, 4)] + [
    TrackBuilder("walkthrough", walk_cut=0.3, sibling_ratio=r) for r in (0.0, 0.5, 1.0)] + [
    TrackBuilder("walkthrough", walk_cut=c, orientation="radius") for c in (0.3, 0.5)]


def default_data() -> Path:
    env = os.environ.get("TRKX_DATA")
    return Path(env) if env else Path(__file__).resolve().parents[2] / "shared/data/trackml"


def scored_event(record, seed: int):
    edges = candidate_graph(record, seed=seed)
    scores, y = gnn_like_scores(record, edges, seed=seed)
    record = record.clone()
    record.edge_index = torch.from_numpy(edges)
    record.scores = torch.from_numpy(scores)
    cut = scores >= 0.5
    stats = {"n_hits": int(record.num_nodes), "n_edges": int(edges.shape[1]),
             "edge_purity_at_0.5": float(y[cut].mean()),
             "truth_edges_at_0.5": float(cut[y].sum() / record.track_edges.shape[1])}
    return record, stats


def run_builders(record) -> list[dict]:
    truth = truth_from_record(record)
    graphs = {o: graph_from_record(record, o) for o in ("given", "radius")}
    rows = []
    for builder in BUILDERS:
        start = time.perf_counter()
        labels = builder.build_graph(graphs[builder.orientation])
        seconds = time.perf_counter() - start
        summary = event_summary(evaluate_event(truth, tracks_frame(record.hit_id, labels, 0)))
        rows.append({"method": builder.method,
                     "cut": builder.cc_cut if builder.method == "components"
                     else builder.walk_cut,
                     "max_layer_hits": builder.max_layer_hits
                     if builder.method == "walkthrough" else None,
                     "orientation": builder.orientation,
                     "sibling_ratio": builder.sibling_ratio
                     if builder.method == "walkthrough" else None,
                     "build_s": seconds,
                     **{k: summary[k] for k in ("efficiency", "fake_rate", "duplicate_rate",
                                                "trackml_score", "n_tracks")}})
    return rows


def print_table(name: str, stats: dict, rows: list[dict]) -> None:
    print(f"\n{name}: {stats['n_hits']:,d} hits, {stats['n_edges']:,d} edges, "
          f"purity {stats['edge_purity_at_0.5']:.3f} and truth-edge efficiency "
          f"{stats['truth_edges_at_0.5']:.3f} at score 0.5")
    print(f"{'method':<12s} {'orient':<6s} {'cut':>4s} {'layer':>5s} {'ratio':>5s} {'eff':>6s} "
          f"{'fake':>6s} {'dup':>6s} {'score':>6s} {'tracks':>7s} {'build s':>8s}")
    for row in rows:
        layer = "-" if row["max_layer_hits"] is None else str(row["max_layer_hits"])
        ratio = "-" if row["sibling_ratio"] is None else f"{row['sibling_ratio']:.1f}"
        print(f"{row['method']:<12s} {row['orientation']:<6s} {row['cut']:>4.1f} {layer:>5s} "
              f"{ratio:>5s} {row['efficiency']:>6.3f} "
              f"{row['fake_rate']:>6.3f} {row['duplicate_rate']:>6.3f} "
              f"{row['trackml_score']:>6.3f} {row['n_tracks']:>7,d} {row['build_s']:>8.3f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=default_data())
    parser.add_argument("--copies", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    prefix = args.data / "sample_event" / "event000000001"
    hits, particles, truth = load_event(prefix, ["hits", "particles", "truth"], detector=None)
    base = build_event_record(hits, None, particles, truth, use_cells=False, event_id=1)
    results = {}
    for name, record in [("sample event", base),
                         (f"{args.copies}-copy overlay", replicate_event(base, args.copies,
                                                                         args.seed))]:
        scored, stats = scored_event(record, args.seed)
        rows = run_builders(scored)
        print_table(name, stats, rows)
        results[name] = {"event": stats, "builders": rows}
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
