"""Inference speed of the trained pipeline, per stage, with the physics of the same run.

    python benchmarks/inference.py --config configs/pu200_cpu.yaml \
        --checkpoints runs/pu200_cpu/checkpoints --events runs/pu200_cpu/data/test \
        [--real-events $TRKX_DATA/kaggle_hits] [--n-events 6] [--json out.json]

Without --config/--checkpoints: the models shipped with trkx (trkx/models/pu200).

The cells path's cost against the hits-only set's on one real event (both sets back to
back): benchmarks/inference_sets.py, which reuses ``run_pass`` and ``summarize_pass``.

For torch threads = 2 and = 1 (``--threads``), on the simulated events (truth, ``--events``)
and on the real hit files (``--real-events``, hits only, needs a hits-only pipeline): the first
event warms up (kernel and precision choices, allocator), then every event is timed: reading and
building the record (``load``), each stage (``embedding``, ``graph``, ``filter``, ``gnn``,
``tracks``) and writing the tracks CSV (``write``); medians over events are reported.

- the *fast* configuration is the pipeline config as given (its precision, graph backend
  ``auto``, ...); the *reference* one is the same models at fp32 with the exact ``kdtree``
  graph. Both are evaluated on the simulated events (double-majority efficiency, fake rate);
  ``efficiency_delta`` = reference - fast;
- ``bf16_efficiency_delta``: the change of each stage's signal-edge efficiency (embedding and
  filter graphs, GNN at the builder's cut) and of the track efficiency when the same models run
  at bf16 instead of fp32 (fp32 - bf16, simulated events); ``bf16_keeps_physics`` says, per
  stage, whether the change is within 0.002 (the bound for choosing bf16 for that stage);
- ``graph_recall``: share of the exact (kdtree) graph's edges that the fast backend finds;
- ``flop_rate_fraction``: each learned stage's dense FLOPs / its median seconds, divided by
  the fp32 GEMM rate measured in the same run (``matmul_rates``, ``stage_flops`` below);
- per learned stage beside its seconds (``stage_roofline``): dense FLOPs and bytes moved per
  event (``stage_flops``, ``stage_bytes`` below), the achieved GFLOP/s and GB/s, and the
  roofline seconds max(FLOPs / fp32 GEMM rate, bytes / memory bandwidth) with the machine's
  rates measured in the same run (``matmul_rates``, ``memory_bandwidth``): ``roofline_fraction``
  = roofline seconds / median seconds, 1 at the machine's limit;
- ``peak_memory_gb``: the process's peak resident memory after the 2-thread simulated pass;
- throughput mode: ``trkx infer --workers N`` for N = 1, 2 (events/s, subprocess);
- ``help_seconds``: wall time of ``python -m trkx --help`` (median of 3).
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

REPO = harness.REPO
STAGES = ("load", "embedding", "graph", "filter", "gnn", "tracks", "parameters", "write")
LEARNED = ("embedding", "filter", "gnn")


#: Largest efficiency change under bf16 that a stage may show to run at bf16.
BF16_TOLERANCE = 0.002


#: FLOPs count 2 per multiply-add of the dense layers as the stages compute them:
#:     embedding: N * sum_l 2 in_l out_l; filter: E_graph * sum_l 2 in_l out_l (every candidate
#:     edge once); gnn: E_filter * f_edge + N * f_node (InteractionGNN.flops_per_edge_and_node).
#: Rates are measured at the thread count in force: a square fp32 GEMM (2048^3), a tall-skinny
#: layer ([65536, 128] x [128, 128], the stages' hidden layers) and a bf16 GEMM.
@torch.inference_mode()
def matmul_rates() -> dict[str, float]:
    """FLOP/s of a square fp32 GEMM, a tall-skinny fp32 layer and a square bf16 GEMM (best of
    3, 1 for bf16, after a warm-up call)."""
    def best_seconds(fn, repeats: int = 3) -> float:
        return harness.best_of(fn, repeats, warmup=True)[1]

    generator = torch.Generator().manual_seed(0)
    a = torch.randn(2048, 2048, generator=generator)
    b = torch.randn(2048, 2048, generator=generator)
    tall = torch.randn(65536, 128, generator=generator)
    weight = torch.randn(128, 128, generator=generator)
    a16, b16 = a.bfloat16(), b.bfloat16()
    return {"gemm_fp32": 2 * 2048**3 / best_seconds(lambda: a @ b),
            "tall_skinny_fp32": 2 * 65536 * 128 * 128 / best_seconds(lambda: tall @ weight),
            "gemm_bf16": 2 * 2048**3 / best_seconds(lambda: a16 @ b16, repeats=1)}


@torch.inference_mode()
def memory_bandwidth() -> float:
    """B/s of a triad ``c = a + 2 b`` over 3 x 128 MB float32 arrays (12 bytes per element:
    two read, one written), best of 3 after a warm-up, at the thread count in force."""
    n = 32 * 2**20
    a, b, c = torch.ones(n), torch.ones(n), torch.empty(n)
    return 12 * n / harness.best_of(lambda: torch.add(a, b, alpha=2.0, out=c), 3,
                                    warmup=True)[1]


#: Bytes moved per event (float32: 4 per word; int64 edge endpoints: 16 per edge), the traffic
#: the stages' inference paths cannot avoid (row-blocked MLPs keep their hidden layers in
#: cache; a gathered row counts once):
#:     embedding: N * 4 (F + d)                   hit features in, embedding out
#:     filter: E_graph * (16 + 4 (2 (F_h + 4) + 2 f + 1))
#:         endpoints, both ends' hit features and (r, phi, z, eta), the f edge features
#:         written and read, the score
#:     gnn: E_filter * (16 + 4 (2 o + a + o)                edge encoder
#:                      + T (16 + 4 (2 o + h + o + h) + 2 (12 + 4 h))   edge net, residual,
#:                                                                    two CSR sums
#:                      + 16 + 4 (2 o + h + 1))              classifier
#:          + N * 4 T (13 h + 2 o)                           node nets, projections
#:     with h the GNN width, o the first Linear's width (h), a its edge inputs, T iterations;
#:     the edge inputs themselves (agreement sort) are not counted.
def stage_bytes(pipeline, n_hits: int, graph_edges: int, filter_edges: int) -> dict[str, int]:
    """Bytes moved by each learned stage on one event (the formulas above)."""
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
    """Warm up on the first event, then time every event; evaluations when with truth."""
    from trkx.data.detector import load_detector
    from trkx.data.events import event_record
    from trkx.embedding.graph import build_edges
    from trkx.embedding.inference import embed
    from trkx.tracks.building import tracks_frame
    from trkx.tracks.event_truth import truth_from_record
    from trkx.tracks.files import atomic_write
    from trkx.tracks.metrics import MetricCuts, evaluate_event

    detector = load_detector()
    rows, evaluations, recalls = [], [], []
    for index, prefix in enumerate([prefixes[0], *prefixes]):
        start = time.perf_counter()
        record = event_record(prefix, detector, pipeline.use_cells, pipeline.signal_pt_min,
                              with_truth=False)
        load = time.perf_counter() - start
        graphs, labels, fits, seconds = pipeline.run_with_table(record)
        start = time.perf_counter()
        pipeline.track_parameters(graphs["gnn"], labels, fits)
        seconds["parameters"] = time.perf_counter() - start
        start = time.perf_counter()
        table = tracks_frame(record.hit_id, labels, int(record.event_id))
        atomic_write(scratch / "tracks.csv", lambda tmp, t=table: t.to_csv(tmp, index=False))
        seconds = {"load": load, **seconds, "write": time.perf_counter() - start}
        if index == 0:
            continue                                   # warm-up
        n = int(record.num_nodes)
        rows.append({**seconds, "total": sum(seconds.values()), "n_hits": n,
                     "graph_edges": int(graphs["embedding"].edge_index.shape[1]),
                     "filter_edges": int(graphs["filter"].edge_index.shape[1])})
        if with_truth:                  # truth read apart: inference does not need it
            truth = event_record(prefix, detector, False, pipeline.signal_pt_min)
            evaluations.append(evaluate_event(truth_from_record(truth), table, MetricCuts()))
        if recall:
            points = embed(pipeline.embedding, record.x)
            exact = edge_keys(build_edges(points, pipeline.radius, pipeline.max_neighbours,
                                          "kdtree", pos=record.pos), n)
            found = edge_keys(graphs["embedding"].edge_index, n)
            recalls.append(float(np.isin(exact, found).mean()) if len(exact) else 1.0)
    return {"rows": rows, "evaluations": evaluations, "recalls": recalls}


def stage_efficiencies(pipeline, prefixes: list[str]) -> dict[str, float]:
    """Pooled signal-edge efficiency of each stage's graph (GNN: at the builder's cut) and the
    track efficiency of ``pipeline`` on events with truth."""
    from trkx.data.detector import load_detector
    from trkx.data.events import event_record
    from trkx.tracks.building import tracks_frame
    from trkx.tracks.edge_metrics import edge_metrics, pool_edge_metrics
    from trkx.tracks.event_truth import truth_from_record
    from trkx.tracks.metrics import MetricCuts, evaluate_event, overall_summary

    detector = load_detector()
    builder = pipeline.builder
    gnn_cut = builder.edge_cut
    per_stage: dict[str, list] = {stage: [] for stage in LEARNED}
    evaluations = []
    for prefix in prefixes:
        record = event_record(prefix, detector, pipeline.use_cells, pipeline.signal_pt_min)
        graphs, labels, _ = pipeline.run(record, edge_labels=True)
        for stage in LEARNED:
            metrics = edge_metrics(graphs[stage], gnn_cut if stage == "gnn" else 0.0)
            if metrics is not None:
                per_stage[stage].append(metrics)
        table = tracks_frame(record.hit_id, labels, int(record.event_id))
        evaluations.append(evaluate_event(truth_from_record(record), table, MetricCuts()))
    out = {stage: float(pool_edge_metrics(rows)["efficiency"])
           for stage, rows in per_stage.items() if rows}
    out["tracks"] = float(overall_summary(evaluations)["efficiency"])
    return out


def summarize_pass(pipeline, result: dict, rates: dict) -> dict:
    """Medians per stage, FLOP rates, graph sizes, physics."""
    from trkx.tracks.metrics import overall_summary

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
    """events/s of ``trkx infer --workers N`` on the simulated events (from its timing.json)."""
    out = scratch / f"workers{workers}"
    models = ["--config", str(args.config), "--checkpoints", str(args.checkpoints)] \
        if args.config else []
    subprocess.run([sys.executable, "-m", "trkx", "--threads", "2", "infer", *models,
                    "--events", str(args.events), "--out", str(out), "--n-events",
                    str(args.n_events), "--workers", str(workers)], check=True, cwd=REPO,
                   stdout=subprocess.DEVNULL)
    return float(json.loads((out / "timing.json").read_text())["events_per_second"])


def help_seconds() -> float:
    return statistics.median(harness.best_of(lambda: subprocess.run(
        [sys.executable, "-m", "trkx", "--help"], check=True, cwd=REPO,
        stdout=subprocess.DEVNULL))[1] for _ in range(3))


def main() -> None:
    parser = harness.parser(__doc__, events="simulated TrackML events with truth",
                            models=True, n_events=6, threads=False)
    parser.add_argument("--real-events", type=Path, default=harness.DATA / "kaggle_hits")
    parser.add_argument("--threads", type=int, nargs="+", default=[2, 1],
                        help="a pass per thread count (default 2 1)")
    parser.add_argument("--workers", type=int, nargs="*", default=[1, 2],
                        help="throughput mode: worker counts to run (none: skip)")
    args = parser.parse_args()
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
            rates = {**matmul_rates(), "memory_bandwidth": memory_bandwidth()}
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
