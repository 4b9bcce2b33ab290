"""Benchmark of the edge filter on simulated events, with per-stage efficiency and purity.

    python benchmarks/filter.py --embedding-checkpoint runs/embedding.pt \
        [--checkpoint runs/filter.pt] [--config configs/filter.yaml] \
        [--test-events data/sim/test] --out runs/bench/filter --json PATH

The test events (TrackML CSV, simulated, disjoint from training) go through the embedding
stage, then the filter. Reported: the share of the signal edges that survived the embedding
which the filter keeps (``signal_edge_efficiency``), the share of the embedding's fake edges
(edges not joining two hits of one particle) it removes (``fake_edge_rejection``), filter
inference seconds per event (edge features + MLP, chunked), and per stage (embedding, filter)
the signal edge efficiency against the truth graph, purity and edges per hit. Without
--checkpoint the filter is trained with its config first (its ``data.events`` must hold the
embedding stage's records of the training events: `trkx infer embedding ...`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default=str(REPO / "configs" / "filter.yaml"))
    parser.add_argument("--checkpoint", default=None, help="trained filter")
    parser.add_argument("--embedding-checkpoint", required=True)
    parser.add_argument("--embedding-config", default=str(REPO / "configs" / "embedding.yaml"),
                        help="its 'graph' section sets the embedding working point")
    parser.add_argument("--test-events", default=str(REPO / "data" / "sim" / "test"))
    parser.add_argument("--score-cut", type=float, default=None)
    parser.add_argument("--out", default=str(REPO / "runs" / "bench" / "filter"))
    parser.add_argument("--json", default=None)
    parser.add_argument("overrides", nargs="*", metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)

    from trkx.data.events import load_records
    from trkx.embedding import cli as embedding_cli
    from trkx.embedding.inference import embedding_graph
    from trkx.embedding.labels import graph_metrics
    from trkx.filter import cli as filter_cli
    from trkx.filter.inference import apply_cut, score_edges
    from trkx.filter.module import filter_metrics

    checkpoint = args.checkpoint
    if checkpoint is None:
        checkpoint = str(out_dir / "filter.pt")
        filter_cli.train(argparse.Namespace(config=args.config, overrides=args.overrides,
                                            checkpoint=checkpoint))
    network, hp, extra = filter_cli.load_network(checkpoint)
    cut = args.score_cut if args.score_cut is not None else hp["score_cut"]
    embedder, ehp, _ = embedding_cli.load_network(args.embedding_checkpoint)
    from trkx.config import load_config

    graph_options = load_config(args.embedding_config).get("graph") or {}
    radius = next(v for v in (graph_options.get("radius"), ehp["radius"]) if v is not None)
    k = next(v for v in (graph_options.get("max_neighbours"), ehp["max_neighbours"])
             if v is not None)
    print(f"embedding working point: radius {radius}, max_neighbours {k}")
    print(f"filter training: {extra.get('train_events')} events, config {json.dumps(hp)}")

    records = load_records(args.test_events, use_cells=bool(hp["cell_agreement"]))
    totals = {"signal_kept": 0, "signal_in": 0, "fake_removed": 0, "fake_in": 0}
    stages: dict[str, list[dict]] = {"embedding": [], "filter": []}
    seconds, all_scores, all_signal, all_fake = [], [], [], []
    for record in records:
        graph = embedding_graph(embedder, record, radius, k, "kdtree")
        start = time.perf_counter()
        scores = score_edges(network, graph, hp["chunk_size"])
        filtered = apply_cut(graph, scores, cut)
        seconds.append(time.perf_counter() - start)
        m = filter_metrics(graph, scores, cut)
        signal, true = graph.signal.bool(), graph.y_pid.bool()
        totals["signal_in"] += int(signal.sum())
        totals["signal_kept"] += int((signal & (scores >= cut)).sum())
        totals["fake_in"] += int((~true).sum())
        totals["fake_removed"] += int((~true & (scores < cut)).sum())
        stages["embedding"].append(graph_metrics(graph))
        stages["filter"].append(graph_metrics(filtered))
        all_scores.append(scores.numpy())
        all_signal.append(signal.numpy())
        all_fake.append((~true).numpy())
        print(f"event {int(record.event_id)}: {graph.edge_index.shape[1]:,d} -> "
              f"{filtered.edge_index.shape[1]:,d} edges, {m}, {seconds[-1]:.3f} s")

    scores = np.concatenate(all_scores)
    signal = np.concatenate(all_signal)
    fake = np.concatenate(all_fake)
    # The cut that keeps 99% of the signal edges, and the rejection it gives (for tuning).
    cut_99 = float(np.quantile(scores[signal], 0.01)) if signal.any() else float("nan")
    result = {
        "signal_edge_efficiency": totals["signal_kept"] / max(totals["signal_in"], 1),
        "fake_edge_rejection": totals["fake_removed"] / max(totals["fake_in"], 1),
        "inference_seconds": float(np.mean(seconds)),
        "score_cut": cut, "cut_for_99pct_signal": cut_99,
        "rejection_at_99pct_signal": float((scores[fake] < cut_99).mean()) if fake.any()
        else float("nan"),
        "train_events": extra.get("train_events"), "test_events": len(records),
        "training_config": hp,
        "stages": {name: {key: float(np.mean([m[key] for m in rows])) for key in rows[0]}
                   for name, rows in stages.items() if rows},
    }
    print(json.dumps({k: v for k, v in result.items() if k != "training_config"}, indent=1))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    torch.set_num_threads(int(os.environ.get("TRKX_THREADS", torch.get_num_threads())))
    raise SystemExit(main())
