"""Benchmark of the embedding stage: graph quality on simulated events, graph-construction and
inference timing on full-size hit clouds.

    python benchmarks/graph_construction.py [--checkpoint runs/embedding.pt] \
        [--config configs/embedding.yaml] [--set KEY=VALUE ...] [--test-events data/sim/test] \
        [--timing-events $TRKX_DATA/kaggle_hits] --out runs/bench/embedding --json PATH

Without --checkpoint the stage is first trained as by ``trkx train embedding --config CONFIG
--set ... --checkpoint OUT/embedding.pt``. The working point: --radius / --max-neighbours, else
the config's ``graph`` section, else the checkpoint's (as ``trkx infer embedding``). Quality
(signal edge efficiency, edges per hit, purity) is measured on --test-events (simulated,
disjoint from training).
Timing: one event of --test-events, a --timing-hits subsample of it (real TrackML events have
~110k hits; the simulator makes more) and, for a position-only model, the first real hit cloud
of --timing-events (no cells there). Every search candidate (SEARCH_CANDIDATES: the compiled
bucket kd-tree of trkx.embedding.bucket_search, cKDTree with and without query chunking, FAISS
HNSW / IVF settings, exact FAISS flat unless --quick) is timed on the same embedding, with its
recall of the exact (cKDTree) graph; the fastest with recall >= --min-recall is reported.
``search`` is the neighbour table, ``build`` adds the unique directed pairs (the whole of
build_edges). Timings are wall-clock on a shared machine: compare one run's figures side by side.

Search only, on a saved embedding (no model, no training):

    python benchmarks/graph_construction.py --embedding emb.npy --radius 0.11 \
        --max-neighbours 32 [--positions pos.npy] [--threads 2] [--quick]
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


SEARCH_CANDIDATES: list[tuple[str, dict]] = [
    ("bucket", {"bucket_size": 32}),
    ("bucket", {"bucket_size": 64}),
    ("bucket", {"bucket_size": 128}),
    ("kdtree", {}),
    ("kdtree", {"chunk_size": 1 << 30}),
    ("faiss_ivf", {"ivf_lists": 1024, "ivf_probe": 4}),
    ("faiss_ivf", {"ivf_lists": 1024, "ivf_probe": 8}),
    ("faiss_ivf", {"ivf_lists": 1024, "ivf_probe": 16}),
    ("faiss_ivf", {"ivf_lists": 2048, "ivf_probe": 8}),
    ("faiss_ivf", {"ivf_lists": 2048, "ivf_probe": 16}),
    ("faiss_hnsw", {"hnsw_m": 16, "hnsw_ef_search": 32}),
    ("faiss_hnsw", {"hnsw_m": 16, "hnsw_ef_search": 64}),
    ("faiss_hnsw", {"hnsw_m": 32, "hnsw_ef_search": 64}),
    ("faiss_flat", {}),
]
QUICK = {"faiss_flat"}  # left out by --quick: an N^2 scan


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


def search_timing(embedding, pos, radius: float, k: int, repeats: int, min_recall: float,
                  label: str, workers: int, quick: bool = False) -> dict:
    """Seconds and recall of every search candidate on one embedding [N, d]."""
    from trkx.embedding.graph import (
        _table_to_edges_numpy,
        inner_to_outer_rank,
        neighbour_table,
        table_to_edges,
    )

    points = np.ascontiguousarray(embedding.numpy() if hasattr(embedding, "numpy")
                                  else embedding, dtype=np.float32)
    n = len(points)
    rank = inner_to_outer_rank(pos, n)
    neighbour_table(points[:2000], radius, k, "bucket")  # numba: load the compiled kernels
    table_to_edges(np.full((2, 1), -1), np.arange(2))
    exact_table, _ = timed(lambda: neighbour_table(points, radius, k, "kdtree", workers=workers))
    exact, numpy_edges_s = timed(lambda: _table_to_edges_numpy(exact_table, rank), repeats)
    compiled, edges_s = timed(lambda: table_to_edges(exact_table, rank), repeats)
    assert np.array_equal(exact, compiled)
    exact_keys = exact[0] * n + exact[1]
    proposals = (exact_table >= 0).sum(1)
    result = {"event": label, "hits": n, "edges": int(exact.shape[1]),
              "proposals_per_hit": float(proposals.mean()),
              "capped_fraction": float((proposals == k).mean()),
              "edges_numpy_seconds": numpy_edges_s, "edges_compiled_seconds": edges_s,
              "candidates": []}
    print(f"[{label}] {n:,d} hits, {exact.shape[1]:,d} edges, {proposals.mean():.1f} "
          f"proposals/hit ({result['capped_fraction']:.1%} capped at k={k}); pairs from the "
          f"table: numpy {numpy_edges_s:.3f} s, compiled {edges_s:.3f} s")
    for backend, options in SEARCH_CANDIDATES:
        if quick and backend in QUICK:
            continue
        table, seconds = timed(lambda b=backend, o=options: neighbour_table(
            points, radius, k, b, workers=workers, **o), repeats)
        edges = table_to_edges(table, rank)
        rec = float(np.isin(exact_keys, edges[0] * n + edges[1]).mean()) if n else 1.0
        row = {"backend": backend, **options, "search_seconds": seconds,
               "build_seconds": seconds + edges_s, "recall": rec}
        result["candidates"].append(row)
        print(f"[{label}]   {backend:10s} {json.dumps(options):40s} search {seconds:6.3f} s, "
              f"build {seconds + edges_s:6.3f} s, recall {rec:.5f}")
    usable = [c for c in result["candidates"] if c["recall"] >= min_recall]
    best = min(usable, key=lambda c: c["search_seconds"])
    kdtree = next(c for c in result["candidates"] if c["backend"] == "kdtree")
    result.update(best=best, graph_build_seconds=best["build_seconds"],
                  graph_recall=best["recall"],
                  speedup_vs_ckdtree=kdtree["search_seconds"] / best["search_seconds"])
    print(f"[{label}] fastest at recall >= {min_recall}: {best['backend']} "
          f"{best['search_seconds']:.3f} s search, {best['build_seconds']:.3f} s build "
          f"({result['speedup_vs_ckdtree']:.2f}x cKDTree)")
    return result


def timing(network, record, radius: float, k: int, repeats: int, min_recall: float,
           label: str, workers: int = -1, quick: bool = False) -> dict:
    """Embedding inference and graph-construction timing of one (full-size) event."""
    from trkx.embedding.inference import embed

    embedding, infer_s = timed(lambda: embed(network, record.x), repeats)
    print(f"[{label}] embedding inference {infer_s:.3f} s")
    result = search_timing(embedding, record.pos, radius, k, repeats, min_recall, label,
                           workers, quick)
    result["embedding_inference_seconds"] = infer_s
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
    from trkx.stage_tools import add_set_argument, overrides_of

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
    parser.add_argument("--embedding", default=None,
                        help="search timing only, on this saved embedding (.npy, [N, d]); "
                             "needs --radius and --max-neighbours")
    parser.add_argument("--positions", default=None,
                        help="with --embedding: (r, phi, z) per hit (.npy) for the direction")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch threads, numba threads and cKDTree workers (default: all)")
    parser.add_argument("--quick", action="store_true",
                        help="leave out the exact N^2 FAISS flat scan; one repeat")
    parser.add_argument("--out", default=str(REPO / "runs" / "bench" / "embedding"))
    parser.add_argument("--json", default=None)
    add_set_argument(parser, "trainer.max_steps=500")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads or min(torch.get_num_threads(), os.cpu_count() or 1))
    workers = args.threads or -1
    repeats = 1 if args.quick else args.repeats
    if args.embedding:
        return search_only(args, workers, repeats)
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)

    from benchmarks.stage_models import embedding_point, trained_events, trained_model
    from trkx.data.events import event_record, load_records
    from trkx.data.listing import event_prefixes
    from trkx.embedding import cli as stage_cli

    network, stored, config = trained_model(stage_cli, args.config, overrides_of(args),
                                            args.checkpoint, out_dir)
    point = embedding_point(config, args.config, stored, args.radius, args.max_neighbours)
    radius, k = point.radius, point.max_neighbours
    print(f"{stored.path}: trained on {trained_events(stored)} events, model "
          f"{json.dumps(stored.config.get('model'))}")
    print(f"working point: radius {radius}, max_neighbours {k}")

    records = load_records(args.test_events, use_cells=point.use_cells,
                           signal_pt_min=point.signal_pt_min)
    result = {"train_events": trained_events(stored), "training_config": stored.config,
              "radius": radius, "max_neighbours": k}
    result.update(quality(network, records, radius, k, out_dir))
    print(f"quality on {len(records)} test events: signal edge efficiency "
          f"{result['signal_edge_efficiency']:.4f}, {result['edges_per_hit']:.2f} edges/hit, "
          f"purity {result['purity']:.4f}")

    timings = [timing(network, records[0], radius, k, repeats, args.min_recall,
                      f"simulated ({int(records[0].num_nodes):,d} hits)", workers, args.quick)]
    if args.timing_hits and args.timing_hits < int(records[0].num_nodes):
        timings.append(timing(network, subsample(records[0], args.timing_hits), radius, k,
                              repeats, args.min_recall,
                              f"simulated, {args.timing_hits:,d}-hit subsample", workers,
                              args.quick))
    real = event_prefixes(args.timing_events) if Path(args.timing_events).is_dir() else []
    if real and stored.constructor["in_features"] <= 3:  # real full-size hit files have no cells
        from trkx.data.detector import load_detector

        record = event_record(real[0], load_detector(), False, 1.0)
        timings.append(timing(network, record, radius, k, repeats, args.min_recall,
                              Path(real[0]).name, workers, args.quick))
    main_timing = timings[-1]  # real hits if usable, else the 110k-hit subsample
    for key in ("graph_build_seconds", "graph_recall", "best", "speedup_vs_ckdtree",
                "embedding_inference_seconds"):
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


def search_only(args, workers: int, repeats: int) -> int:
    """--embedding: the search candidates on a saved embedding, nothing else."""
    if args.radius is None or args.max_neighbours is None:
        print("--embedding needs --radius and --max-neighbours", file=sys.stderr)
        return 2
    embedding = np.load(args.embedding)
    pos = np.load(args.positions) if args.positions else None
    result = search_timing(embedding, pos, args.radius, args.max_neighbours, repeats,
                           args.min_recall, Path(args.embedding).name, workers, args.quick)
    result.update(radius=args.radius, max_neighbours=args.max_neighbours, threads=args.threads)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
