"""Distributed GNN benchmark on the pipeline's own graphs: traffic, edge balance, memory, step
time and hang detection.

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

import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import timedelta
from pathlib import Path
from unittest import mock

import harness
import numpy as np
import torch
import torch.distributed as dist
from harness import free_port, peak_rss_kib, release_free_heap, reset_peak_rss, rss_kib

from trkx.gnn.distributed.figures import partition_figures
from trkx.gnn.distributed.partition import make_partition

REPO = harness.REPO
PARTITIONERS = ("sector", "balanced", "refined")
DEFAULT = "balanced"


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


# ---------------------------------------------------------------- hang detection
def measure_hang(graph: dict, timeout_s: float, work: Path) -> float | None:
    """Seconds from SIGSTOP of rank 1 (of 2, ``torchrun -m trkx train gnn``) until rank 0
    prints its one-line error naming ``distributed.timeout_s``; None when it never did."""
    import yaml
    from torch_geometric.data import Data

    from trkx.data.record import save_record
    events = work / "hang_events"
    data = Data(x=graph["x"], pos=graph["pos"], edge_index=graph["edge_index"],
                y=graph["y"].bool(), signal=graph["signal"])
    data.num_nodes = graph["x"].shape[0]
    save_record(data, events / "event.pt")
    config = {"data": {"train_dir": str(events), "val_dir": str(events)},
              "model": {"hidden": 16, "n_graph_iters": 2, "n_mlp_layers": 1,
                        "edge_features": 0},
              "module": {"graph_ops": "csr", "tune_tracks": False},
              "trainer": {"max_steps": 10 ** 6, "val_every_n_epochs": 10 ** 6, "logger": "none",
                          "progress_bar": False, "accelerator": "cpu"},
              "distributed": {"timeout_s": timeout_s}}
    path = work / "hang.yaml"
    path.write_text(yaml.safe_dump(config))
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    launcher = subprocess.Popen(
        [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
         "--master-port", str(free_port()), "-m", "trkx", "train", "gnn", "--config",
         str(path), "--checkpoint", str(work / "hang.pt")], cwd=REPO, env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    lines: list[tuple[float, str]] = []
    threading.Thread(target=lambda: lines.extend((time.time(), x) for x in launcher.stderr),
                     daemon=True).start()
    workers: list[int] = []
    try:
        last = work / "hang.run" / "last.ckpt"   # one event: written after every step
        deadline = time.time() + 600
        while not last.is_file() and time.time() < deadline and launcher.poll() is None:
            time.sleep(0.2)
        children = Path(f"/proc/{launcher.pid}/task/{launcher.pid}/children").read_text()
        workers = [int(pid) for pid in children.split()]
        ranks = {}
        for pid in workers:
            env_items = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            ranks.update({int(i[5:]): pid for i in env_items if i.startswith(b"RANK=")})
        os.kill(ranks[1], signal.SIGSTOP)
        stopped = time.time()
        while time.time() < stopped + timeout_s + 120:
            hit = next((t for t, x in list(lines) if "distributed.timeout_s" in x), None)
            if hit is not None:
                return hit - stopped
            time.sleep(0.2)
        return None
    finally:   # every torchrun worker has its own session
        for pid in workers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        os.killpg(launcher.pid, signal.SIGKILL)
        launcher.wait()


# ---------------------------------------------------------------- rank workers
def _init(rank: int, world: int, port: int) -> None:
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world, timeout=timedelta(seconds=600))


def traffic_worker(rank: int, world: int, port: int, graph_file: str, configs: list,
                   width: int, out_dir: str) -> None:
    """One GNN iteration (gather + aggregate, forward + backward) per config; save counters."""
    torch.set_num_threads(1)
    _init(rank, world, port)
    from trkx.gnn.distributed.factory import GraphParallel
    g = torch.load(graph_file, weights_only=True)
    results = {}
    for algorithm, partitioner, c in configs:
        gp = GraphParallel(algorithm, partitioner, c)
        owner = g["owners"][f"{partitioner}|{world // c}"]
        part = gp.shard(g["edge_index"], owner.numel(), owner=owner)
        h = torch.randn(part.ops.num_nodes, width, requires_grad=True)
        gp.stats.reset()
        hs, hd = part.ops.gather(h)
        m_in, m_out = part.ops.aggregate(hs + hd)
        (m_in + m_out).sum().backward()
        results[f"{algorithm}|{partitioner}|{c}"] = gp.stats.snapshot()
    torch.save(results, Path(out_dir) / f"traffic{rank}.pt")
    dist.destroy_process_group()


def step_worker(rank: int, world: int, port: int, graph_file: str, algorithm: str,
                partitioner: str, model_kwargs: dict, steps: int, threads: int,
                out_dir: str, overlap: bool = True, allocator: str = "trkx") -> None:
    """Training steps of InteractionGNN; world == 1: single process with CSR GraphOps.
    ``allocator``: ``trkx``, the allocator of trkx commands (trkx/allocator.py: the preload
    this benchmark re-executed itself under, inherited, else glibc's caching settings);
    ``off``: the C library's defaults (measure_steps spawns the ranks without the preload)."""
    from trkx import allocator as allocators

    if allocator == "trkx" and allocators.mapped_allocator() is None:
        allocators.apply_glibc_settings()
    torch.set_num_threads(threads)
    from trkx.gnn.distributed.bookkeeping import all_reduce_gradients, rank_loss
    from trkx.gnn.local_ops import CsrGraphOps
    from trkx.gnn.model import InteractionGNN
    runtime_rss = rss_kib()                   # interpreter + torch, before any data
    g = torch.load(graph_file, weights_only=True)
    edge_index, x, y = g["edge_index"], g["x"], g["y"]
    if world > 1:
        _init(rank, world, port)
        from trkx.gnn.distributed.factory import GraphParallel
        gp = GraphParallel(algorithm, partitioner, 1, overlap=overlap)
        owner = g["owners"][f"{partitioner}|{world}"]
        part = gp.shard(edge_index, owner.numel(), owner=owner)
        ops, x, y = part.ops, x[part.nodes], y[part.edges]
    else:
        ops = CsrGraphOps(edge_index, x.shape[0])
    del g
    torch.manual_seed(0)
    model = InteractionGNN(x.shape[1], **model_kwargs)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step() -> None:
        logits = model(x, ops)
        terms = torch.nn.functional.binary_cross_entropy_with_logits(logits, y,
                                                                     reduction="none")
        loss = rank_loss(terms, edge_index.shape[1])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        all_reduce_gradients(model.parameters())
        opt.step()

    step()                                    # warm-up (CSR build, allocator, optimiser state)
    release_free_heap()
    base = rss_kib()
    reset_peak_rss()
    times = []
    for _ in range(steps):
        if world > 1:
            dist.barrier()
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    result = {"times": times, "rss_before_kib": base, "peak_rss_kib": peak_rss_kib(),
              "runtime_rss_kib": runtime_rss}
    torch.save(result, Path(out_dir) / f"step{rank}.pt")
    if world > 1:
        dist.destroy_process_group()


def spawn(fn, nprocs: int, *args) -> None:
    torch.multiprocessing.spawn(fn, args=(nprocs, free_port(), *args), nprocs=nprocs,
                                join=True)


# ---------------------------------------------------------------- measurements
def measure_traffic(graph_file: Path, world_sizes: list[int], width: int, work: Path) -> dict:
    """Bytes the ranks received in one GNN iteration, per algorithm/partitioner/P."""
    table: dict = {}
    for P in world_sizes:
        configs = [(a, p, 1) for a in ("oblivious-1d", "sparse-1d") for p in PARTITIONERS]
        t0 = time.perf_counter()
        spawn(traffic_worker, P, str(graph_file), configs, width, str(work))
        ranks = [torch.load(work / f"traffic{r}.pt", weights_only=True) for r in range(P)]
        for key in ranks[0]:
            per_rank = [sum(v["bytes_received"] for v in r[key].values()) for r in ranks]
            algorithm, partitioner, _ = key.split("|")
            table.setdefault(algorithm, {}).setdefault(partitioner, {})[str(P)] = {
                "total_bytes": sum(per_rank), "max_rank_bytes": max(per_rank)}
        print(f"  traffic P={P}: {time.perf_counter() - t0:.1f} s", flush=True)
    return table


def measure_steps(graph_file: Path, world: int, threads: int, model_kwargs: dict, steps: int,
                  work: Path, algorithm: str = "sparse-1d", partitioner: str = DEFAULT,
                  env: dict[str, str] | None = None, overlap: bool = True,
                  allocator: str = "trkx") -> dict:
    if allocator == "off":                    # spawned ranks start without the preload
        env = {**(env or {}), "LD_PRELOAD": "", "TRKX_ALLOCATOR": "off"}
    with mock.patch.dict(os.environ, env or {}):     # the ranks inherit it
        spawn(step_worker, world, str(graph_file), algorithm, partitioner, model_kwargs, steps,
              threads, str(work), overlap, allocator)
    ranks = [torch.load(work / f"step{r}.pt", weights_only=True) for r in range(world)]
    step_time = statistics.median(max(r["times"][i] for r in ranks) for i in range(steps))
    return {"step_time_s": step_time,
            "peak_rss_mib": [r["peak_rss_kib"] / 1024 for r in ranks],
            "peak_above_runtime_mib": [(r["peak_rss_kib"] - r["runtime_rss_kib"]) / 1024
                                       for r in ranks],
            "step_peak_increase_mib": [(r["peak_rss_kib"] - r["rss_before_kib"]) / 1024
                                       for r in ranks]}


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
    parser.add_argument("--hang-timeout", type=float, default=60.0, help="distributed."
                        "timeout_s of the hang measurement (default: the shipped default)")
    parser.add_argument("--skip-steps", action="store_true", help="no memory / step-time runs")
    parser.add_argument("--memory-only", action="store_true", help="only the per-rank memory "
                        "under trkx's allocator (no traffic, balance, step time, hang, ...)")
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
        args.hang_timeout = min(args.hang_timeout, 5.0)
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
    single = four = single_glibc = four_glibc = None
    one_proc, two_proc, overlap_on, overlap_off, glibc_1x2 = [], [], [], [], []
    SN, SE = step_graph["x"].shape[0], step_graph["edge_index"].shape[1]
    if not args.skip_steps:
        step_file = work / "step_graph.pt"
        torch.save({**step_graph, "owners": {
            f"{DEFAULT}|{P}": make_partition(DEFAULT, P, step_graph["edge_index"],
                                             step_graph["pos"], SN) for P in (2, 4)}},
                   step_file)
        print(f"steps on {step_graph['name']}: {SN} hits, {SE} edges", flush=True)
        print(f"memory: InteractionGNN {model}, trkx's allocator, then glibc's", flush=True)
        single = measure_steps(step_file, 1, 1, model, args.steps, work)
        four = measure_steps(step_file, 4, 1, model, args.steps, work)
        if not args.memory_only:
            single_glibc = measure_steps(step_file, 1, 1, model, args.steps, work,
                                         allocator="off")
            four_glibc = measure_steps(step_file, 4, 1, model, args.steps, work,
                                       allocator="off")
        print("step time: 2 processes x 1 thread vs 1 x 2; overlap on/off", flush=True)
        for _ in range(0 if args.memory_only else 2):
            for world, threads, times in ((1, 2, one_proc), (2, 1, two_proc)):
                times.append(measure_steps(step_file, world, threads, model, args.steps,
                                           work)["step_time_s"])
            for overlap, times in ((True, overlap_on), (False, overlap_off)):
                times.append(measure_steps(step_file, 2, 1, model, args.steps, work,
                                           overlap=overlap)["step_time_s"])
            glibc_1x2.append(measure_steps(step_file, 1, 2, model, args.steps, work,
                                           allocator="off")["step_time_s"])
        print(f"  1x2 {one_proc}  2x1 {two_proc}  overlap on {overlap_on} off {overlap_off}",
              flush=True)
    hang = None
    if not args.memory_only:
        print(f"hang: SIGSTOP 1 of 2 ranks, timeout_s={args.hang_timeout:g}", flush=True)
        hang = measure_hang(step_graph, args.hang_timeout, work)

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
        "peak_memory_ratio_p4_glibc_default": None if single_glibc is None else ratio(
            max(four_glibc["peak_rss_mib"]), single_glibc["peak_rss_mib"][0]),
        "step_time_ratio_allocator": ratio(median(one_proc), median(glibc_1x2)),
        "hang_detect_seconds": hang, "hang_timeout_s": args.hang_timeout,
        "balance": balance, "bytes": traffic,
        "memory": {"single": single, "p4": four, "single_glibc_default": single_glibc,
                   "p4_glibc_default": four_glibc, "model": model},
        "step_times": {"one_proc_two_threads": one_proc, "two_proc_one_thread": two_proc,
                       "p2_overlap_on": overlap_on, "p2_overlap_off": overlap_off,
                       "one_proc_two_threads_glibc_default": glibc_1x2},
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
