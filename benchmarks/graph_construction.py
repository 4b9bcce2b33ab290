"""Benchmark of the embedding stage: graph quality on simulated events, graph-construction and
inference timing on full-size hit clouds.

    python benchmarks/graph_construction.py [--checkpoint runs/embedding.pt] \
        [--config configs/embedding.yaml] [--test-events data/sim/test] \
        [--timing-events $TRKX_DATA/kaggle_hits] --out runs/bench/embedding --json PATH

Without --checkpoint the stage is first trained with the config. Quality (signal edge efficiency,
edges per hit, purity) is measured on --test-events (simulated, disjoint from training).
Timing: one event of --test-events, a --timing-hits subsample of it (real TrackML events have
~110k hits; the simulator makes more) and, for a position-only model, the first real hit cloud
of --timing-events (no cells there), for the
default CPU backend (cKDTree), exact FAISS flat search, and the fastest FAISS CPU index
(HNSW / IVF settings scanned) whose recall of the exact graph is >= --min-recall.
Timings are wall-clock on a shared machine: compare the figures of one run side by side.
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

from trkx.embedding.graph import build_edges

FAISS_CANDIDATES: list[tuple[str, dict]] = [
    ("faiss_ivf", {"ivf_lists": 1024, "ivf_probe": 4}),
    ("faiss_ivf", {"ivf_lists": 1024, "ivf_probe": 8}),
    ("faiss_ivf", {"ivf_lists": 1024, "ivf_probe": 16}),
    ("faiss_ivf", {"ivf_lists": 2048, "ivf_probe": 8}),
    ("faiss_ivf", {"ivf_lists": 2048, "ivf_probe": 16}),
    ("faiss_hnsw", {"hnsw_m": 16, "hnsw_ef_search": 32}),
    ("faiss_hnsw", {"hnsw_m": 16, "hnsw_ef_search": 64}),
    ("faiss_hnsw", {"hnsw_m": 32, "hnsw_ef_search": 64}),
]


def timed(fn, repeats: int = 1):
    """(result, best wall time of ``repeats`` runs)."""
    best, result = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return result, best


def edge_keys(edges: torch.Tensor, n: int) -> np.ndarray:
    e = edges.numpy()
    return np.unique(e[0] * n + e[1])


def recall(found: torch.Tensor, exact_keys: np.ndarray, n: int) -> float:
    return float(np.isin(exact_keys, edge_keys(found, n)).mean()) if len(exact_keys) else 1.0


def timing(network, record, radius: float, k: int, repeats: int, min_recall: float,
           label: str) -> dict:
    """Graph-construction and inference timing of one (full-size) event."""
    from trkx.embedding.inference import embed

    n = int(record.num_nodes)
    embedding, infer_s = timed(lambda: embed(network, record.x), repeats)
    exact, kdtree_s = timed(lambda: build_edges(embedding, radius, k, "kdtree", pos=record.pos),
                            repeats)
    exact_keys = edge_keys(exact, n)
    flat, flat_s = timed(lambda: build_edges(embedding, radius, k, "faiss_flat",
                                             pos=record.pos))
    result = {"event": label, "hits": n, "edges": int(exact.shape[1]),
              "embedding_inference_seconds": infer_s, "ckdtree_seconds": kdtree_s,
              "exact_seconds": flat_s, "exact_flat_recall": recall(flat, exact_keys, n),
              "faiss_scan": []}
    print(f"[{label}] {n:,d} hits: embedding {infer_s:.3f} s; cKDTree (exact) {kdtree_s:.3f} s,"
          f" {exact.shape[1]:,d} edges; FAISS flat (exact) {flat_s:.3f} s, recall "
          f"{result['exact_flat_recall']:.5f}")
    best = None
    for backend, options in FAISS_CANDIDATES:
        edges, seconds = timed(lambda b=backend, o=options: build_edges(
            embedding, radius, k, b, pos=record.pos, **o), repeats)
        rec = recall(edges, exact_keys, n)
        result["faiss_scan"].append({"backend": backend, **options, "seconds": seconds,
                                     "recall": rec})
        print(f"[{label}]   {backend} {options}: {seconds:.3f} s, recall {rec:.5f}")
        if rec >= min_recall and (best is None or seconds < best[0]):
            best = (seconds, rec, backend, options)
    if best is None:
        best = (flat_s, result["exact_flat_recall"], "faiss_flat", {})
    result.update(faiss_cpu_seconds=best[0], faiss_recall=best[1],
                  faiss_backend=f"{best[2]} {best[3]}")
    return result


def subsample(record, hits: int, seed: int = 0):
    """A record of ``hits`` random hits of ``record`` (features and positions only)."""
    from torch_geometric.data import Data

    keep = torch.from_numpy(np.sort(np.random.default_rng(seed).choice(
        int(record.num_nodes), hits, replace=False)))
    sub = Data(x=record.x[keep], pos=record.pos[keep])
    sub.num_nodes = hits
    return sub


def quality(network, records, radius: float, k: int, out_dir: Path) -> dict:
    from benchmarks.graph_recall import plot_efficiency, truth_edges_found
    from trkx.embedding.inference import embedding_graph
    from trkx.embedding.labels import signal_truth_edges

    signal_kept = signal_total = edges = hits = pid_edges = 0
    pts, etas, founds, signals = [], [], [], []
    for record in records:
        out = embedding_graph(network, record, radius, k, "kdtree")
        signal_kept += int(out.signal.sum())
        signal_total += signal_truth_edges(record)
        edges += int(out.edge_index.shape[1])
        pid_edges += int(out.y_pid.sum())
        hits += int(record.num_nodes)
        truth = record.track_edges.numpy()
        founds.append(truth_edges_found(record, out.edge_index))
        pts.append(record.pt.numpy()[truth[0]])
        etas.append(record.eta.numpy()[truth[0]])
        signal_hit = record.signal_hit.numpy()
        signals.append(signal_hit[truth[0]] & signal_hit[truth[1]])
    figures = plot_efficiency(np.concatenate(pts), np.concatenate(etas), np.concatenate(founds),
                              np.concatenate(signals), out_dir, "embedding")
    return {"signal_edge_efficiency": signal_kept / max(signal_total, 1),
            "edges_per_hit": edges / max(hits, 1), "purity": pid_edges / max(edges, 1),
            "test_events": len(records), "test_hits_per_event": hits / max(len(records), 1),
            "figures": [str(p) for p in figures]}


def main(argv: list[str] | None = None) -> int:
    data_root = Path(os.environ.get("TRKX_DATA", REPO.parent / "shared" / "data" / "trackml"))
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default=str(REPO / "configs" / "embedding.yaml"))
    parser.add_argument("--checkpoint", default=None)
    parser.add_argument("--test-events", default=str(REPO / "data" / "sim" / "test"))
    parser.add_argument("--timing-events", default=str(data_root / "kaggle_hits"))
    parser.add_argument("--radius", type=float, default=None)
    parser.add_argument("--max-neighbours", type=int, default=None)
    parser.add_argument("--min-recall", type=float, default=0.999)
    parser.add_argument("--timing-hits", type=int, default=110_000,
                        help="also time a random subsample of this many hits of a simulated "
                             "event (the size of a real TrackML event)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", default=str(REPO / "runs" / "bench" / "embedding"))
    parser.add_argument("--json", default=None)
    parser.add_argument("overrides", nargs="*", metavar="KEY=VALUE",
                        help="config overrides for training without --checkpoint")
    args = parser.parse_args(argv)
    torch.set_num_threads(min(torch.get_num_threads(), os.cpu_count() or 1))
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)

    from trkx.embedding import cli as stage_cli
    from trkx.embedding.events import event_prefixes, event_record, load_records

    checkpoint = args.checkpoint
    if checkpoint is None:
        checkpoint = str(out_dir / "embedding.pt")
        stage_cli.train(argparse.Namespace(config=args.config, overrides=args.overrides,
                                           checkpoint=checkpoint))
    network, hp, extra = stage_cli.load_network(checkpoint)
    from trkx.config import apply_overrides, load_config

    graph = apply_overrides(load_config(args.config), args.overrides).get("graph") or {}
    # Working point: command line, else the config's inference section, else the model's.
    radius = next(v for v in (args.radius, graph.get("radius"), hp["radius"]) if v is not None)
    k = next(v for v in (args.max_neighbours, graph.get("max_neighbours"), hp["max_neighbours"])
             if v is not None)
    use_cells = bool(extra.get("use_cells", False))
    print(f"training: {extra.get('train_events')} events, config {json.dumps(hp)}")
    print(f"working point: radius {radius}, max_neighbours {k}")

    records = load_records(args.test_events, use_cells=use_cells)
    result = {"train_events": extra.get("train_events"), "training_config": hp,
              "radius": radius, "max_neighbours": k}
    result.update(quality(network, records, radius, k, out_dir))
    print(f"quality on {len(records)} test events: signal edge efficiency "
          f"{result['signal_edge_efficiency']:.4f}, {result['edges_per_hit']:.2f} edges/hit, "
          f"purity {result['purity']:.4f}")

    timings = [timing(network, records[0], radius, k, args.repeats, args.min_recall,
                      f"simulated ({int(records[0].num_nodes):,d} hits)")]
    if args.timing_hits and args.timing_hits < int(records[0].num_nodes):
        timings.append(timing(network, subsample(records[0], args.timing_hits), radius, k,
                              args.repeats, args.min_recall,
                              f"simulated, {args.timing_hits:,d}-hit subsample"))
    real = event_prefixes(args.timing_events) if Path(args.timing_events).is_dir() else []
    if real and hp["in_features"] <= 3:  # real full-size hit files have no cells
        from trkx.data.detector import load_detector

        record = event_record(real[0], load_detector(), False, 1.0)
        timings.append(timing(network, record, radius, k, args.repeats, args.min_recall,
                              Path(real[0]).name))
    main_timing = timings[-1]  # real hits if usable, else the 110k-hit subsample
    for key in ("faiss_cpu_seconds", "faiss_recall", "faiss_backend", "exact_seconds",
                "ckdtree_seconds", "embedding_inference_seconds"):
        result[key] = main_timing[key]
    result["timing_event"] = main_timing["event"]
    result["timings"] = timings
    print(json.dumps({k: v for k, v in result.items() if k not in ("timings",
                                                                    "training_config")},
                     indent=1))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
