"""Distributed GNN benchmark on the pipeline's own graphs: traffic, edge balance, memory and step
time (a stopped rank ending the job within ``distributed.timeout_s`` is a test:
tests/test_distributed_train.py).

Graphs: filter-stage event records (``pos``, ``x``, ``edge_index``, ``y``, ``signal``: the
output of ``trkx infer filter``, e.g. simulated pile-up-200 events run through the pipeline),
plus a "multi-event" graph of ``--multi-event K`` of them side by side (node ids offset: one
disconnected graph of ~K x the hits, the kind that outgrows one device). ``--quick`` instead
takes a few hundred particles of the real sample event with an xyz radius graph (a check that
the benchmark runs, not a measurement). Everything runs on gloo/CPU. Bytes are what the ranks'
wrapped collectives sent and received (``CommStats``), checked against the analytic volumes
(``trkx.gnn.distributed.figures``).

    python benchmarks/distributed.py --events runs/pu200/filter --json results/distributed.json
    python benchmarks/distributed.py --quick --json /tmp/distributed_quick.json
"""

from __future__ import annotations

if __name__ == "__main__":
    import harness
    harness.start()

import json
import statistics
import sys
import tempfile
from pathlib import Path

import harness
import numpy as np
import torch
from distributed_ranks import DEFAULT, PARTITIONERS, measure_steps, measure_traffic

from trkx.gnn.distributed.figures import partition_figures
from trkx.gnn.distributed.partition import make_partition


# ---------------------------------------------------------------- graphs
def load_graphs(folder: Path, n_events: int) -> list[dict]:
    from trkx.data.listing import record_paths
    from trkx.data.record import load_record
    graphs = []
    for path in record_paths(str(folder))[:n_events]:
        data = load_record(path)
        graphs.append({"name": path.name, "pos": data.pos.float(), "x": data.x.float(),
                       "edge_index": data.edge_index.long(), "y": data.y.float(),
                       "signal": data.signal.bool()})
    if not graphs:
        raise SystemExit(f"{folder}: no event records")
    return graphs


def side_by_side(graphs: list[dict]) -> dict:
    """One graph of all ``graphs`` (node ids of graph i offset by the nodes before it)."""
    offsets = np.cumsum([0] + [g["x"].shape[0] for g in graphs])[:-1]
    return {"name": f"{len(graphs)} events side by side",
            "pos": torch.cat([g["pos"] for g in graphs]), "x": torch.cat([g["x"] for g in graphs]),
            "edge_index": torch.cat([g["edge_index"] + int(o) for g, o in zip(graphs, offsets)],
                                    1),
            "y": torch.cat([g["y"] for g in graphs]),
            "signal": torch.cat([g["signal"] for g in graphs])}


def quick_graph(particles: int = 300) -> dict:
    """``particles`` particles' hits of the sample event with an xyz radius graph (labelled)."""
    from trkx.data.detector import load_detector
    from trkx.data.events import event_record
    from trkx.embedding.graph import build_edges
    from trkx.embedding.labels import label_edges
    record = event_record(str(harness.DATA / "sample_event" / "event000000001"), load_detector(),
                          use_cells=False, signal_pt_min=1.0)
    pid = record.particle_id.numpy()
    chosen = np.random.default_rng(0).choice(np.unique(pid[pid != 0]), particles, replace=False)
    keep = torch.as_tensor(np.flatnonzero(np.isin(pid, chosen)))
    from torch_geometric.data import Data
    sub = Data(pos=record.pos[keep], x=record.x[keep], particle_id=record.particle_id[keep],
               signal_hit=record.signal_hit[keep])
    sub.num_nodes = keep.numel()
    new = torch.full((int(record.num_nodes),), -1, dtype=torch.int64)
    new[keep] = torch.arange(keep.numel())
    edges = new[record.track_edges]
    sub.track_edges = edges[:, (edges >= 0).all(0)]
    r, phi, z = sub.pos.T
    xyz = torch.stack([r * torch.cos(phi), r * torch.sin(phi), z], 1) / 1000.0
    sub.edge_index = build_edges(xyz, 0.1, 8, "kdtree", pos=sub.pos)
    y, _, signal_edges = label_edges(sub, sub.edge_index)
    return {"name": f"quick: {particles} particles of sample event 1, xyz radius graph",
            "pos": sub.pos.float(), "x": sub.x.float(), "edge_index": sub.edge_index.long(),
            "y": y.float(), "signal": signal_edges.bool()}


def plot(result: dict, path: Path) -> None:
    """Edge balance per P and bytes per GNN iteration per P, every partitioner."""
    fig, (left, right) = harness.pyplot().subplots(1, 2, figsize=(11, 4))
    sizes = sorted(int(P) for P in result["balance"])
    def mib(name: str, algorithm: str) -> list[float]:
        return [result["balance"][str(P)][name]["bytes"][algorithm]["total"] / 2**20
                for P in sizes]

    for name in PARTITIONERS:
        left.plot(sizes, [result["balance"][str(P)][name]["edge_imbalance"] for P in sizes],
                  "-o", label=name, markersize=3)
        right.plot(sizes, mib(name, "sparse-1d"), "-o", markersize=3, label=f"sparse-1d, {name}")
    right.plot(sizes, mib(DEFAULT, "oblivious-1d"), "k:", label="oblivious-1d (any partition)")
    left.set(xlabel="processes P", ylabel="edges max / mean", title="edge balance")
    right.set(yscale="log", xlabel="processes P",
              ylabel=f"MiB received per GNN iteration (width {result['width']})",
              title="traffic, all ranks")
    for ax in (left, right):
        ax.set_xscale("log", base=2)
        ax.set_xticks(sizes, [str(P) for P in sizes])
        ax.minorticks_off()
    left.legend()
    right.legend(fontsize=7)
    fig.suptitle(result["graph"]["name"], fontsize=9)
    harness.save_figure(fig, path)


# ---------------------------------------------------------------- main
def ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b == 0 else a / b


def median(times: list[float]) -> float | None:
    return statistics.median(times) if times else None


def main() -> int:
    parser = harness.parser(__doc__, events="filter-stage event records", n_events=8, plot=True,
                            quick="a small graph from the sample event; checks the script runs")
    parser.add_argument("--multi-event", type=int, default=8, help="events side by side in "
                        "the graph of the traffic and balance figures (default 8; 1: one)")
    parser.add_argument("--step-events", type=int, default=1, help="events side by side in the "
                        "graph of the memory, step-time and overlap figures (default 1)")
    parser.add_argument("--width", type=int, default=128, help="feature columns per exchange")
    parser.add_argument("--world-sizes", type=int, nargs="+", default=[4, 8],
                        help="processes for the measured traffic (default 4 8)")
    parser.add_argument("--balance-sizes", type=int, nargs="+", default=[2, 4, 8, 16, 32, 64],
                        help="P of the edge-balance figures (no processes)")
    parser.add_argument("--hidden", type=int, default=64, help="model width (memory/time)")
    parser.add_argument("--iters", type=int, default=4, help="model iterations (memory/time)")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--skip-steps", action="store_true", help="no memory / step-time runs")
    parser.add_argument("--memory-only", action="store_true", help="only the per-rank memory "
                        "(no traffic, balance or step time)")
    parser.add_argument("--replot", type=Path, metavar="JSON",
                        help="only draw --plot from a JSON this script wrote")
    args = harness.parse(parser)
    if args.replot:
        plot(json.loads(args.replot.read_text()), args.plot or args.replot.with_suffix(".png"))
        return 0
    if args.quick:
        graph = step_graph = quick_graph()
        args.world_sizes, args.balance_sizes = [2, 4], [2, 4, 8]
        args.hidden, args.iters, args.steps = 8, 1, 1
    elif args.events is None:
        parser.error("--events DIR (filter-stage records) or --quick")
    else:
        graphs = load_graphs(args.events, max(args.n_events, args.multi_event,
                                              args.step_events))
        graph = side_by_side(graphs[:args.multi_event]) if args.multi_event > 1 else graphs[0]
        step_graph = (side_by_side(graphs[:args.step_events]) if args.step_events > 1
                      else graphs[0])
    if args.memory_only:
        args.world_sizes, args.balance_sizes, args.skip_steps = [], [], False
    work = Path(tempfile.mkdtemp(prefix="trkx_bench_dist_"))
    N, E = graph["x"].shape[0], graph["edge_index"].shape[1]
    print(f"graph: {graph['name']}: {N} hits, {E} edges", flush=True)

    balance = {}
    for P in args.balance_sizes:
        balance[str(P)] = {name: partition_figures(graph["edge_index"], graph["pos"], N, P, name,
                                                   args.width) for name in PARTITIONERS}
        cells = "  ".join(f"{n} {f['edge_imbalance']:.3f}" for n, f in balance[str(P)].items())
        print(f"  edges max/mean P={P}: {cells}", flush=True)

    owners = {f"{name}|{P}": make_partition(name, P, graph["edge_index"], graph["pos"], N)
              for P in args.world_sizes for name in PARTITIONERS}
    graph_file = work / "graph.pt"
    torch.save({**graph, "owners": owners}, graph_file)
    traffic = measure_traffic(graph_file, args.world_sizes, args.width, work)
    analytic_equal = True
    for P in args.world_sizes:
        for name in PARTITIONERS:
            figures = partition_figures(graph["edge_index"], graph["pos"], N, P, name,
                                        args.width)["bytes"]
            for algorithm in ("sparse-1d", "oblivious-1d"):
                measured = traffic[algorithm][name][str(P)]
                analytic_equal &= (measured["total_bytes"] == figures[algorithm]["total"]
                                   and measured["max_rank_bytes"]
                                   == figures[algorithm]["max_rank"])

    def bytes_ratio(P: int) -> float | None:
        if P not in args.world_sizes:
            return None
        return ratio(traffic["sparse-1d"][DEFAULT][str(P)]["total_bytes"],
                     traffic["oblivious-1d"][DEFAULT][str(P)]["total_bytes"])

    model = {"hidden": args.hidden, "n_graph_iters": args.iters, "n_mlp_layers": 1}
    single = four = None
    one_proc, two_proc, overlap_on, overlap_off = [], [], [], []
    SN, SE = step_graph["x"].shape[0], step_graph["edge_index"].shape[1]
    if not args.skip_steps:
        step_file = work / "step_graph.pt"
        torch.save({**step_graph, "owners": {
            f"{DEFAULT}|{P}": make_partition(DEFAULT, P, step_graph["edge_index"],
                                             step_graph["pos"], SN) for P in (2, 4)}},
                   step_file)
        print(f"steps on {step_graph['name']}: {SN} hits, {SE} edges", flush=True)
        print(f"memory: InteractionGNN {model}", flush=True)
        single = measure_steps(step_file, 1, 1, model, args.steps, work)
        four = measure_steps(step_file, 4, 1, model, args.steps, work)
        print("step time: 2 processes x 1 thread vs 1 x 2; overlap on/off", flush=True)
        for _ in range(0 if args.memory_only else 2):
            for world, threads, times in ((1, 2, one_proc), (2, 1, two_proc)):
                times.append(measure_steps(step_file, world, threads, model, args.steps,
                                           work)["step_time_s"])
            for overlap, times in ((True, overlap_on), (False, overlap_off)):
                times.append(measure_steps(step_file, 2, 1, model, args.steps, work,
                                           overlap=overlap)["step_time_s"])
        print(f"  1x2 {one_proc}  2x1 {two_proc}  overlap on {overlap_on} off {overlap_off}",
              flush=True)

    def imbalance(P: int) -> float | None:
        row = balance.get(str(P))
        return None if row is None else row[DEFAULT]["edge_imbalance"]

    result = {
        "graph": {"name": graph["name"], "nodes": N, "edges": E, "quick": args.quick,
                  "events": None if args.events is None else str(args.events)},
        "partitioner": DEFAULT, "width": args.width,
        "sparse1d_over_oblivious_p4": bytes_ratio(4),
        "sparse1d_over_oblivious_p8": bytes_ratio(8),
        "measured_bytes_equal_analytic": analytic_equal,
        "edge_imbalance_p4": imbalance(4), "edge_imbalance_p8": imbalance(8),
        "edge_imbalance_p64": imbalance(64),
        "peak_memory_ratio_p4": None if single is None else ratio(
            max(four["peak_rss_mib"]), single["peak_rss_mib"][0]),
        "step_time_ratio_2proc": ratio(median(two_proc), median(one_proc)),
        "overlap_step_time_ratio": ratio(median(overlap_on), median(overlap_off)),
        "step_graph": {"name": step_graph["name"], "nodes": SN, "edges": SE},
        "balance": balance, "bytes": traffic,
        "memory": {"single": single, "p4": four, "model": model},
        "step_times": {"one_proc_two_threads": one_proc, "two_proc_one_thread": two_proc,
                       "p2_overlap_on": overlap_on, "p2_overlap_off": overlap_off},
    }
    for key, value in result.items():             # the headline figures
        if not isinstance(value, dict):
            print(f"{key}: {value}")
    harness.write_json(args.json, result)
    if args.plot and not args.memory_only:
        plot(result, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
