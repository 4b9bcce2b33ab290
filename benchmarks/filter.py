"""Benchmark of the edge filter on simulated events, with per-stage efficiency and purity.

    python benchmarks/filter.py --embedding-checkpoint runs/embedding.pt \
        [--checkpoint runs/filter.pt] [--config configs/filter.yaml] [--set KEY=VALUE ...] \
        [--test-events data/sim/test] --out runs/bench/filter --json PATH

The test events (TrackML CSV, simulated, disjoint from training) go through the embedding
stage, then the filter. Reported: the share of the signal edges that survived the embedding
which the filter keeps (``signal_edge_efficiency``), the share of the embedding's fake edges
(edges not joining two hits of one particle) it removes (``fake_edge_rejection``), filter
inference seconds per event (edge features + MLP, chunked), and per stage (embedding, filter)
the signal edge efficiency against the truth graph, purity and edges per hit. The embedding
working point is --embedding-config's ``graph`` section (null: the checkpoint's); the filter's
cut and chunk size are --config's ``inference`` section (null cut: the checkpoint's working
point), unless --score-cut. Without --checkpoint the filter is first trained as by
``trkx train filter --config CONFIG --set ... --checkpoint OUT/filter.pt`` (its
``data.train_dir`` must hold the embedding stage's records of the training events:
``trkx infer embedding ...``).
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

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main(argv: list[str] | None = None) -> int:
    from trkx.stage_tools import add_set_argument, overrides_of

    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default=str(REPO / "configs" / "filter.yaml"),
                        help="filter stage YAML (training without --checkpoint; its "
                             "'inference' section sets the cut)")
    parser.add_argument("--checkpoint", default=None, help="trained filter (default: train one)")
    parser.add_argument("--embedding-checkpoint", required=True)
    parser.add_argument("--embedding-config", default=str(REPO / "configs" / "embedding.yaml"),
                        help="its 'graph' section sets the embedding working point")
    parser.add_argument("--test-events", default=str(REPO / "data" / "sim" / "test"))
    parser.add_argument("--score-cut", type=float, default=None)
    parser.add_argument("--out", default=str(REPO / "runs" / "bench" / "filter"))
    parser.add_argument("--json", default=None)
    add_set_argument(parser, "trainer.max_steps=500")
    args = parser.parse_args(argv)
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)

    from benchmarks.stage_models import embedding_point, trained_events, trained_model
    from trkx.config import instantiate, section
    from trkx.data.events import load_records
    from trkx.embedding import cli as embedding_cli
    from trkx.embedding.checkpoint import load_model as load_embedding
    from trkx.embedding.inference import embedding_graph
    from trkx.embedding.labels import graph_metrics
    from trkx.filter import cli as filter_cli
    from trkx.filter.checkpoint import FilterInference
    from trkx.filter.inference import apply_cut, score_edges
    from trkx.filter.module import filter_metrics
    from trkx.stage_tools import stage_config

    network, stored, config = trained_model(filter_cli, args.config, overrides_of(args),
                                            args.checkpoint, out_dir)
    options = instantiate(FilterInference, section(config, "inference", args.config),
                          f"{args.config}: inference")
    cut = args.score_cut if args.score_cut is not None else options.cut(stored)
    embedder, embedding = load_embedding(args.embedding_checkpoint)
    point = embedding_point(stage_config(args.embedding_config, [], embedding_cli),
                            args.embedding_config, embedding)
    radius, k = point.radius, point.max_neighbours
    print(f"embedding working point: radius {radius}, max_neighbours {k}")
    print(f"filter {stored.path}: trained on {trained_events(stored)} events, working point "
          f"{stored.working_point}, model {json.dumps(stored.config.get('model'))}")

    records = load_records(args.test_events, use_cells=point.use_cells,
                           signal_pt_min=point.signal_pt_min)
    totals = {"signal_kept": 0, "signal_in": 0, "fake_removed": 0, "fake_in": 0}
    stages: dict[str, list[dict]] = {"embedding": [], "filter": []}
    seconds, all_scores, all_signal, all_fake = [], [], [], []
    for record in records:
        graph = embedding_graph(embedder, record, radius, k, "kdtree")
        start = time.perf_counter()
        scores = score_edges(network, graph, options.chunk_size)
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
        "train_events": trained_events(stored), "test_events": len(records),
        "working_point": stored.working_point, "training_config": stored.config,
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
