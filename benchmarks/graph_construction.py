"""Which neighbour search builds the graph stage fastest: every backend setting on one embedding.

    python benchmarks/graph_construction.py [--events DIR] [--config PIPELINE.yaml
        --checkpoints DIR] [--quick] [--threads N] [--json PATH]
    python benchmarks/graph_construction.py --embedding emb.npy --radius 0.11 \
        --max-neighbours 32 [--positions pos.npy] [--quick]

The embedding is the pipeline's (default: the shipped models) of the first event of
``--events`` (default: the real event 21001, ``$TRKX_DATA/real_pixel_truth``) at its working
point (radius, max_neighbours), or a saved one (``--embedding``, [N, d] .npy; ``--positions``:
(r, phi, z) per hit for the inner-to-outer direction). Every search candidate
(SEARCH_CANDIDATES: the compiled bucket kd-tree of trkx.embedding.bucket_search, cKDTree with
and without query chunking, FAISS HNSW / IVF settings, exact FAISS flat unless --quick) is timed
on it, with its recall of the exact (cKDTree) graph; the fastest with recall >= --min-recall is
reported. ``search`` is the neighbour table, ``build`` adds the unique directed pairs (the whole
of build_edges). The pairs of the pipeline's own table (the bucket search, other layers only
when the pipeline asks for it) are timed both ways, alternately: each partner's row scanned for
the mutual proposals, and decided by the search's distances. The pipeline's physics per stage
is benchmarks/physics.py; its seconds per stage benchmarks/inference.py.
"""

from __future__ import annotations

if __name__ == "__main__":
    import harness
    harness.start()

import json
import time
from pathlib import Path

import harness
import numpy as np
from harness import best_of

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


def pair_timing(points: np.ndarray, rank: np.ndarray, radius: float, k: int, repeats: int,
                groups: np.ndarray | None) -> dict:
    """The unique directed pairs of the bucket search's table (``groups``: the pipeline's
    other-layers search), by scanning rows and by the search's distances, timed alternately:
    the seconds of each (best and median) and the same edges asserted."""
    from trkx.embedding.bucket_search import bucket_neighbours, unique_directed_pairs

    table, squared = bucket_neighbours(points, radius, k, groups=groups, distances=True)
    seconds: dict[str, list[float]] = {"scan": [], "distance": []}
    edges = {}
    for _ in range(max(1, repeats)):
        for way, given in (("scan", None), ("distance", squared)):
            begin = time.perf_counter()
            edges[way] = unique_directed_pairs(table, rank, given)
            seconds[way].append(time.perf_counter() - begin)
    assert np.array_equal(edges["scan"], edges["distance"])
    return {"other_layers_only": groups is not None, "edges": int(edges["scan"].shape[1]),
            **{f"pairs_{way}_seconds": min(v) for way, v in seconds.items()},
            **{f"pairs_{way}_median_seconds": float(np.median(v)) for way, v in seconds.items()}}


def search_timing(embedding, pos, radius: float, k: int, repeats: int, min_recall: float,
                  label: str, workers: int, quick: bool = False,
                  groups: np.ndarray | None = None) -> dict:
    """Seconds and recall of every search candidate on one embedding [N, d]; the pairs of the
    pipeline's table both ways (:func:`pair_timing`, ``groups``: each hit's layer when the
    pipeline searches the other layers only)."""
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
    exact_table, _ = best_of(lambda: neighbour_table(points, radius, k, "kdtree", workers=workers))
    exact, numpy_edges_s = best_of(lambda: _table_to_edges_numpy(exact_table, rank), repeats)
    compiled, edges_s = best_of(lambda: table_to_edges(exact_table, rank), repeats)
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
    result["pipeline_pairs"] = pairs = pair_timing(points, rank, radius, k, repeats, groups)
    print(f"[{label}] the pipeline's table ({pairs['edges']:,d} edges, other layers only: "
          f"{pairs['other_layers_only']}): pairs by scanning rows {pairs['pairs_scan_seconds']:.3f}"
          f" s (median {pairs['pairs_scan_median_seconds']:.3f}), by the search's distances "
          f"{pairs['pairs_distance_seconds']:.3f} s (median "
          f"{pairs['pairs_distance_median_seconds']:.3f}), the same edges")
    for backend, options in SEARCH_CANDIDATES:
        if quick and backend in QUICK:
            continue
        table, seconds = best_of(lambda b=backend, o=options: neighbour_table(
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



def pipeline_embedding(args) -> tuple[np.ndarray, object, float, int, str, np.ndarray | None]:
    """The pipeline's embedding of the first event of --events at its working point, and each
    hit's layer when the pipeline searches the other layers only."""
    from trkx.data.detector import load_detector
    from trkx.data.events import event_record
    from trkx.data.listing import event_prefixes
    from trkx.embedding.inference import embed, layer_key

    data = harness.DATA
    prefix = event_prefixes(str(args.events or data / "real_pixel_truth"))[0]
    pipeline = harness.load_pipeline(args)
    record = event_record(prefix, load_detector(), pipeline.use_cells, pipeline.signal_pt_min)
    embedding, seconds = best_of(lambda: embed(pipeline.embedding, record.x))
    print(f"{Path(prefix).name}: embedding {seconds:.3f} s")
    groups = (layer_key(record).numpy() if pipeline.embedding_options.other_layers_only
              else None)
    return (embedding.numpy(), record.pos, args.radius or pipeline.radius,
            args.max_neighbours or pipeline.max_neighbours, Path(prefix).name, groups)


def main(argv: list[str] | None = None) -> int:
    parser = harness.parser(__doc__, events="TrackML events; the first is embedded (default: "
                            "$TRKX_DATA/real_pixel_truth)", models=True,
                            quick="leave out the exact N^2 FAISS flat scan; one repeat")
    parser.add_argument("--embedding", type=Path, help="a saved embedding (.npy, [N, d]) "
                        "instead of the pipeline's; needs --radius and --max-neighbours")
    parser.add_argument("--positions", type=Path, help="with --embedding: (r, phi, z) per hit")
    parser.add_argument("--radius", type=float, help="default: the pipeline's working point")
    parser.add_argument("--max-neighbours", type=int, help="default: the pipeline's")
    parser.add_argument("--min-recall", type=float, default=0.999)
    parser.add_argument("--repeats", type=int, default=2)
    args = harness.parse(parser, argv)
    repeats = 1 if args.quick else args.repeats
    if args.embedding:
        if args.radius is None or args.max_neighbours is None:
            parser.error("--embedding needs --radius and --max-neighbours")
        embedding = np.load(args.embedding)
        pos = np.load(args.positions) if args.positions else None
        radius, k, label, groups = args.radius, args.max_neighbours, args.embedding.name, None
    else:
        embedding, pos, radius, k, label, groups = pipeline_embedding(args)
    result = search_timing(embedding, pos, radius, k, repeats, args.min_recall, label,
                           args.threads, args.quick, groups)
    result.update(radius=radius, max_neighbours=k)
    harness.write_json(args.json, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
