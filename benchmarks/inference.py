"""Inference cost of a trained pipeline, per stage, with the physics of the same run.

    python benchmarks/inference.py --config configs/pu200_cpu.yaml \
        --checkpoints runs/pu200_cpu/checkpoints --events runs/pu200_cpu/data/test \
        [--real-events $TRKX_DATA/kaggle_hits] [--n-events 6] [--json out.json]
    python benchmarks/inference.py --sets $TRKX_DATA/real_pixel_truth/event000021001 \
        --threads 2 [--repeats 3] [--cells-models DIR] [--json out.json]

Without --config/--checkpoints: the shipped models (trkx/models/pu200). Every event goes
through ``TrainedPipeline.event_tracks`` (the engine of ``trkx infer``: seconds of
``load``, ``embedding``, ``graph``, ``filter``, ``gnn``, ``tracks``, ``parameters``), then its
tracks CSV is written (``write``); the first event of a pass warms up; medians over events.

Per torch thread count (``--threads``, default 2 then 1), on the simulated events (``--events``,
with truth) and the real hit files (``--real-events``, hits-only models): the models as
configured (*fast*) and at fp32 with the exact ``kdtree`` graph (*reference*), both evaluated
(``efficiency_delta`` = reference - fast); ``graph_recall``, the share of the exact graph's
edges the fast backend finds; per learned stage (``stage_roofline``) its dense FLOPs and bytes
moved per event (``stage_flops``, ``stage_bytes``), GFLOP/s and GB/s, and ``roofline_fraction``
= max(FLOPs / fp32 GEMM rate, bytes / memory bandwidth) / median seconds with the rates measured
in the same run (``harness.matmul_rates``, ``harness.memory_bandwidth``; ``flop_rate_fraction``:
FLOPs / seconds / GEMM rate); ``bf16_efficiency_delta`` per stage and ``bf16_keeps_physics``
(within 0.002); ``peak_memory_gb``; ``throughput_events_per_second`` of the batch engine
(``trkx.pipeline.batch.infer_events``, ``--workers``); ``help_seconds`` of ``trkx --help``.

``--sets PREFIX``, the cells path's cost: the cells set on the event with its cells
and the hits-only set on its hits, alternating ``--repeats`` times in this process; per set the
median seconds per stage and rooflines, ``ratio`` = cells / hits-only median seconds per event
(target <= 1.2), ``pass_ratios`` per pair of neighbouring passes (the machine's noise), and
``peak_memory_gb`` of a separate ``trkx infer`` process per set (what a user's command takes).
``--cells-models DIR`` times a candidate cells set (a ``trkx package`` folder) instead.
"""

from __future__ import annotations

if __name__ == "__main__":
    import harness
    harness.start()

import dataclasses
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import harness
import numpy as np
import torch
from torch import nn

from trkx.stage_names import LEARNED_STAGES

REPO = harness.REPO
STAGES = ("load", "embedding", "graph", "filter", "gnn", "tracks", "parameters", "write")
LEARNED = LEARNED_STAGES
SETS = ("pu200_cells", "pu200")          # --sets: the cells set, the hits-only set


#: Largest efficiency change under bf16 that a stage may show to run at bf16.
BF16_TOLERANCE = 0.002


def stage_bytes(pipeline, n_hits: int, graph_edges: int, filter_edges: int) -> dict[str, int]:
    """Bytes each learned stage cannot avoid moving on one event (float32 words 4, int64 edge
    endpoints 16 per edge; row-blocked MLPs keep their hidden layers in cache):

        embedding: N 4 (F + d)                      hit features in, embedding out
        filter: E_graph (16 + 4 (2 (F_h + 4) + 2 f + 1))   ends, their features, f edge inputs
        gnn: E_filter (16 + 4 (3 o + a)                    edge encoder
                       + T (16 + 4 (3 o + 2 h) + 2 (12 + 4 h))   edge net, two CSR sums
                       + 16 + 4 (2 o + h + 1))             classifier
             + N 4 T (13 h + 2 o)                          node nets

    with h the GNN width, o = h, a its edge inputs, T its iterations. FLOPs (``stage_flops``)
    count 2 per multiply-add of the dense layers: embedding N, filter E_graph, GNN E_filter
    edge and N node rows (InteractionGNN.flops_per_edge_and_node)."""
    linears = [m for m in pipeline.embedding.modules() if isinstance(m, nn.Linear)]
    network = pipeline.filter
    gnn = pipeline.gnn
    h, o, a, t = gnn.hidden, gnn.hidden, gnn.edge_features, gnn.n_graph_iters
    per_edge = (16 + 4 * (2 * o + a + o)
                + t * (16 + 4 * (2 * o + h + o + h) + 2 * (12 + 4 * h))
                + 16 + 4 * (2 * o + h + 1))
    return {"embedding": n_hits * 4 * (linears[0].in_features + linears[-1].out_features),
            "filter": graph_edges * (16 + 4 * (2 * (network.hit_features + 4)
                                                + 2 * network.in_features + 1)),
            "gnn": filter_edges * per_edge + n_hits * 4 * t * (13 * h + 2 * o)}


def dense_flops(module: nn.Module) -> int:
    """FLOPs of one row through every Linear of ``module`` (2 per multiply-add)."""
    return sum(2 * m.in_features * m.out_features for m in module.modules()
               if isinstance(m, nn.Linear))


def stage_flops(pipeline, n_hits: int, graph_edges: int, filter_edges: int) -> dict[str, int]:
    """Dense FLOPs of each learned stage on one event (module docstring)."""
    per_edge, per_node = pipeline.gnn.flops_per_edge_and_node()
    return {"embedding": n_hits * dense_flops(pipeline.embedding),
            "filter": graph_edges * dense_flops(pipeline.filter),
            "gnn": filter_edges * per_edge + n_hits * per_node}


def median(values: list[float]) -> float:
    return float(statistics.median(values)) if values else float("nan")


def edge_keys(edge_index: torch.Tensor, n: int) -> np.ndarray:
    e = edge_index.cpu().numpy()
    return np.unique(e[0] * n + e[1])


def run_pass(pipeline, prefixes: list[str], with_truth: bool, scratch: Path,
             recall: bool = False) -> dict:
    """Warm up on the first event, then time every event (``TrainedPipeline.event_tracks``
    and the tracks CSV written); evaluations when with truth (read apart: inference never
    reads it)."""
    from trkx.data.detector import load_detector
    from trkx.data.events import event_record
    from trkx.embedding.graph import build_edges
    from trkx.embedding.inference import embed
    from trkx.tracks.evaluate.event_truth import truth_from_record
    from trkx.tracks.evaluate.metrics import MetricCuts, evaluate_event
    from trkx.tracks.files import atomic_write

    detector = load_detector()
    rows, evaluations, recalls = [], [], []
    for index, prefix in enumerate([prefixes[0], *prefixes]):
        event = pipeline.event_tracks(detector, prefix, stage_graphs=True)
        start = time.perf_counter()
        atomic_write(scratch / "tracks.csv",
                     lambda tmp, t=event.tracks: t.to_csv(tmp, index=False))
        seconds = {**event.seconds, "write": time.perf_counter() - start}
        if index == 0:
            continue                                   # warm-up
        rows.append({**seconds, "total": sum(seconds.values()), "n_hits": event.n_hits,
                     **{f"{key}_edges": int(event.graphs[stage].edge_index.shape[1])
                        for key, stage in (("graph", "embedding"), ("filter", "filter"))}})
        if not (with_truth or recall):
            continue
        record = event_record(prefix, detector, pipeline.use_cells, pipeline.signal_pt_min,
                              with_truth=with_truth)
        if with_truth:
            evaluations.append(evaluate_event(truth_from_record(record), event.tracks,
                                              MetricCuts()))
        if recall:
            n = event.n_hits
            points = embed(pipeline.embedding, record.x)
            exact = edge_keys(build_edges(points, pipeline.radius, pipeline.max_neighbours,
                                          "kdtree", pos=record.pos), n)
            found = edge_keys(event.graphs["embedding"].edge_index, n)
            recalls.append(float(np.isin(exact, found).mean()) if len(exact) else 1.0)
    return {"rows": rows, "evaluations": evaluations, "recalls": recalls}


def stage_efficiencies(pipeline, prefixes: list[str]) -> dict[str, float]:
    """Pooled signal-edge efficiency of each stage's graph (GNN: at the builder's cut) and the
    track efficiency of ``pipeline`` on events with truth."""
    from trkx.data.detector import load_detector
    from trkx.tracks.evaluate.edge_metrics import edge_metrics, pool_edge_metrics
    from trkx.tracks.evaluate.event_truth import truth_from_record
    from trkx.tracks.evaluate.metrics import MetricCuts, evaluate_event, overall_summary

    detector = load_detector()
    gnn_cut = pipeline.builder.edge_cut
    per_stage: dict[str, list] = {stage: [] for stage in LEARNED}
    evaluations = []
    for prefix in prefixes:
        event = pipeline.event_tracks(detector, prefix, graphs_with_truth=True)
        for stage in LEARNED:
            metrics = edge_metrics(event.graphs[stage], gnn_cut if stage == "gnn" else 0.0)
            if metrics is not None:
                per_stage[stage].append(metrics)
        evaluations.append(evaluate_event(truth_from_record(event.graphs["gnn"]), event.tracks,
                                          MetricCuts()))
    out = {stage: float(pool_edge_metrics(rows)["efficiency"])
           for stage, rows in per_stage.items() if rows}
    out["tracks"] = float(overall_summary(evaluations)["efficiency"])
    return out


def summarize_pass(pipeline, result: dict, rates: dict) -> dict:
    """Medians per stage, FLOP rates, graph sizes, physics."""
    from trkx.tracks.evaluate.metrics import overall_summary

    rows = result["rows"]
    seconds = {s: median([r[s] for r in rows]) for s in (*STAGES, "total")}
    flops = [stage_flops(pipeline, r["n_hits"], r["graph_edges"], r["filter_edges"])
             for r in rows]
    moved = [stage_bytes(pipeline, r["n_hits"], r["graph_edges"], r["filter_edges"])
             for r in rows]
    rate = {s: median([f[s] / r[s] for f, r in zip(flops, rows)]) for s in LEARNED}
    roofline = {}
    for s in LEARNED:
        limit = [max(f[s] / rates["gemm_fp32"], b[s] / rates["memory_bandwidth"])
                 for f, b in zip(flops, moved)]
        roofline[s] = {"seconds": seconds[s], "flops": median([f[s] for f in flops]),
                       "bytes": median([b[s] for b in moved]),
                       "gflop_per_s": median([f[s] / r[s] / 1e9 for f, r in zip(flops, rows)]),
                       "gb_per_s": median([b[s] / r[s] / 1e9 for b, r in zip(moved, rows)]),
                       "roofline_seconds": median(limit),
                       "roofline_fraction": median([x / r[s] for x, r in zip(limit, rows)])}
    out = {"stage_seconds": seconds, "end_to_end_seconds": seconds["total"],
           "overhead_seconds": median([r["load"] + r["tracks"] + r["parameters"] + r["write"]
                                       for r in rows]),
           "flops_per_event": {s: median([f[s] for f in flops]) for s in LEARNED},
           "flop_rate": rate,
           "flop_rate_fraction": {s: rate[s] / rates["gemm_fp32"] for s in LEARNED},
           "stage_roofline": roofline,
           "hits": median([r["n_hits"] for r in rows]),
           "graph_edges": median([r["graph_edges"] for r in rows]),
           "filter_edges": median([r["filter_edges"] for r in rows]), "events": len(rows)}
    if result["evaluations"]:
        overall = overall_summary(result["evaluations"])
        out["physics"] = {k: float(overall[k]) for k in
                          ("efficiency", "efficiency_err", "fake_rate", "duplicate_rate",
                           "trackml_score")}
    if result["recalls"]:
        out["graph_recall"] = float(np.mean(result["recalls"]))
    return out


def throughput(args, workers: int, scratch: Path) -> float:
    """events/s of ``trkx infer``'s batch engine with ``workers`` processes on the simulated
    events (loading excluded)."""
    from trkx.data.listing import event_prefixes
    from trkx.pipeline.batch import Outputs, infer_events
    from trkx.pipeline.model_sets import model_groups

    prefixes = event_prefixes(args.events)[: args.n_events]
    groups = model_groups(args.config, args.checkpoints, prefixes)
    return infer_events(groups, prefixes, Outputs(scratch / f"workers{workers}"), (),
                        torch.device("cpu"), workers, progress=False).events_per_second


def help_seconds() -> float:
    return statistics.median(harness.best_of(lambda: subprocess.run(
        [sys.executable, "-m", "trkx", "--help"], check=True, cwd=REPO,
        stdout=subprocess.DEVNULL))[1] for _ in range(3))


def model_sets(cells_models: Path | None) -> dict[str, Path]:
    """``--sets``: each set's folder, the cells set replaced by ``cells_models`` when given."""
    from trkx.models import shipped_models

    folders = {name: Path(shipped_models(name).checkpoints) for name in SETS}
    if cells_models is not None:
        if not (cells_models / "pipeline.yaml").is_file():
            raise SystemExit(f"--cells-models {cells_models}: no pipeline.yaml there")
        folders["pu200_cells"] = cells_models
    return folders


def peak_memory_gb(prefix: str, folder: Path, threads: int, scratch: Path) -> float:
    """Peak resident memory (GB) of a ``trkx infer`` process reconstructing the folder of
    ``prefix``'s event with the set in ``folder`` (its ``timing.json``)."""
    link = scratch / "event"                  # a folder holding only this event's files
    link.mkdir(exist_ok=True)
    for path in Path(prefix).parent.glob(f"{Path(prefix).name}-*"):
        if not (link / path.name).exists():
            (link / path.name).symlink_to(path.resolve())
    out = scratch / f"out_{folder.name}"
    subprocess.run([sys.executable, "-m", "trkx", "--threads", str(threads), "infer",
                    "--config", str(folder / "pipeline.yaml"), "--checkpoints", str(folder),
                    "--events", str(link), "--out", str(out), "--no-evaluate"],
                   cwd=REPO, stdout=subprocess.DEVNULL, check=True)
    return float(json.loads((out / "timing.json").read_text())["peak_memory_gb"])


def sets_on_event(args, scratch: Path) -> dict:
    """``--sets``: both sets on one event, alternating (module docstring)."""
    from trkx.pipeline.inference import TrainedPipeline

    folders = model_sets(args.cells_models)
    rates = harness.machine_rates()
    sets = {name: TrainedPipeline.load(folder / "pipeline.yaml", folder, device="cpu")
            for name, folder in folders.items()}
    if not sets["pu200_cells"].use_cells or sets["pu200"].use_cells:
        raise SystemExit("the cells set must read cells and the hits-only set must not")
    rows: dict[str, list] = {name: [] for name in sets}
    for _ in range(args.repeats):
        for name, pipeline in sets.items():
            rows[name] += run_pass(pipeline, [args.sets], False, scratch)["rows"]
    summaries = {name: summarize_pass(sets[name], {"rows": found, "evaluations": [],
                                                   "recalls": []}, rates)
                 for name, found in rows.items()}
    figures = {"event": args.sets, "repeats": args.repeats, "machine": rates, "sets": summaries,
               "models": {name: str(folder) for name, folder in folders.items()},
               "ratio": summaries["pu200_cells"]["end_to_end_seconds"]
               / summaries["pu200"]["end_to_end_seconds"],
               "pass_ratios": [cells["total"] / hits["total"]
                               for cells, hits in zip(rows["pu200_cells"], rows["pu200"])],
               "peak_memory_gb": {name: peak_memory_gb(args.sets, folder, args.threads[0],
                                                       scratch)
                                  for name, folder in folders.items()}}
    for name, result in summaries.items():
        print(f"{name}: median s " + ", ".join(
            f"{s} {v:.3f}" for s, v in result["stage_seconds"].items()) + "; roofline "
            + ", ".join(f"{s} {v['roofline_fraction']:.2f}"
                        for s, v in result["stage_roofline"].items())
            + f"; peak memory {figures['peak_memory_gb'][name]:.2f} GB")
    print(f"cells set / hits-only set: {figures['ratio']:.2f} (per pass "
          + ", ".join(f"{r:.2f}" for r in figures["pass_ratios"]) + ")")
    return figures


def main() -> None:
    parser = harness.parser(__doc__, events="simulated TrackML events with truth",
                            models=True, n_events=6, threads=False)
    parser.add_argument("--real-events", type=Path, default=harness.DATA / "kaggle_hits")
    parser.add_argument("--threads", type=int, nargs="+", default=[2, 1],
                        help="a pass per thread count (default 2 1)")
    parser.add_argument("--workers", type=int, nargs="*", default=[1, 2],
                        help="throughput mode: worker counts to run (none: skip)")
    parser.add_argument("--sets", metavar="PREFIX", help="both shipped sets on this event with "
                        "cells (dir/eventNNNNNNNNN), back to back")
    parser.add_argument("--repeats", type=int, default=3, help="--sets: passes of each set")
    parser.add_argument("--cells-models", type=Path, default=None,
                        help="--sets: a candidate cells set's folder instead of the shipped one")
    args = parser.parse_args()
    if args.sets is not None:
        torch.set_num_threads(args.threads[0])
        with tempfile.TemporaryDirectory() as scratch_dir:
            harness.write_json(args.json, sets_on_event(args, Path(scratch_dir)))
        return
    if args.events is None:
        parser.error("--events DIR (simulated events with truth) is required")

    from trkx.data.listing import event_prefixes

    fast = harness.load_pipeline(args)
    reference = harness.load_pipeline(args, ("inference.precision=fp32",))
    reference.embedding_options = dataclasses.replace(reference.embedding_options, backend="kdtree")
    simulated = event_prefixes(args.events)[: args.n_events]
    real = event_prefixes(args.real_events)[: args.n_events] if args.real_events.is_dir() \
        else []
    if real and fast.use_cells:
        print(f"{args.real_events}: hit files without cells, but these models use cell "
              "features: real events skipped (time a hits-only pipeline)")
        real = []
    figures: dict = {"config": str(args.config), "checkpoints": str(args.checkpoints),
                     "machine": {}, "threads": {}}
    with tempfile.TemporaryDirectory() as scratch_dir:
        scratch = Path(scratch_dir)
        for threads in args.threads:
            torch.set_num_threads(threads)
            rates = harness.machine_rates()
            figures["machine"][str(threads)] = rates
            print(f"[{threads} threads] G/s: " + ", ".join(f"{k} {v / 1e9:.1f}"
                                                          for k, v in rates.items()))
            part = {"simulated": summarize_pass(fast, run_pass(
                fast, simulated, True, scratch, recall=threads == args.threads[0]), rates)}
            if threads == args.threads[0]:
                figures["peak_memory_gb"] = resource.getrusage(
                    resource.RUSAGE_SELF).ru_maxrss / 2**20
                part["reference"] = summarize_pass(reference, run_pass(
                    reference, simulated, True, scratch), rates)
            if real:
                part["real"] = summarize_pass(fast, run_pass(fast, real, False, scratch),
                                              rates)
            figures["threads"][str(threads)] = part
            for name, result in part.items():        # the rest: in the JSON
                print(f"[{threads} threads] {name}: median s " + ", ".join(
                    f"{s} {v:.3f}" for s, v in result["stage_seconds"].items()), flush=True)
        figures["throughput_events_per_second"] = {
            str(n): throughput(args, n, scratch) for n in args.workers}
    first = figures["threads"][str(args.threads[0])]
    figures.update(
        end_to_end_seconds=first["simulated"]["end_to_end_seconds"],
        real_end_to_end_seconds=first["real"]["end_to_end_seconds"] if "real" in first
        else None,
        graph_build_seconds=first["simulated"]["stage_seconds"]["graph"],
        graph_recall=first["simulated"].get("graph_recall"),
        stage_seconds=first["simulated"]["stage_seconds"],
        flop_rate_fraction=first["simulated"]["flop_rate_fraction"],
        stage_roofline=first["simulated"]["stage_roofline"],
        efficiency_delta=(first["reference"]["physics"]["efficiency"]
                          - first["simulated"]["physics"]["efficiency"]),
        help_seconds=help_seconds(),
        precision=fast.precisions)
    at = {precision: stage_efficiencies(harness.load_pipeline(
        args, (f"inference.precision={precision}",)), simulated)
        for precision in ("fp32", "bf16")}
    figures["bf16_efficiency_delta"] = {k: at["fp32"][k] - at["bf16"][k] for k in at["fp32"]}
    figures["bf16_keeps_physics"] = {k: abs(v) <= BF16_TOLERANCE
                                     for k, v in figures["bf16_efficiency_delta"].items()}
    print(json.dumps({k: figures[k] for k in (
        "end_to_end_seconds", "real_end_to_end_seconds", "graph_build_seconds", "graph_recall",
        "efficiency_delta", "bf16_efficiency_delta", "help_seconds", "peak_memory_gb",
        "throughput_events_per_second")}, indent=1))
    harness.write_json(args.json, figures)


if __name__ == "__main__":
    main()
