"""Distributed GNN benchmark: traffic per algorithm/partitioner/P, memory, step time, projection.

Graph: a real TrackML event's hits (``kaggle_hits``, ~110k hits) joined by the layer-neighbour
rule of ``benchmarks/geometric_graph.py`` (nearby hits on adjacent layers, k=6,
|d eta|, |d phi| < 0.06): a realistic geometric stand-in until filtered simulated MU=200 graphs
exist. Everything runs on gloo/CPU; traffic is counted by the ranks (``CommStats``).

    python benchmarks/distributed.py --json bench_distributed.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import socket
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.distributed_projection import project
from trkx.gnn.distributed.partition import make_partition

ALGORITHMS = ("oblivious-1d", "sparse-1d", "1.5d")
PARTITIONERS = ("contiguous", "sector", "balanced")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def peak_rss_kib() -> int:
    return int(re.search(r"VmHWM:\s+(\d+)", Path("/proc/self/status").read_text()).group(1))


def rss_kib() -> int:
    return int(re.search(r"VmRSS:\s+(\d+)", Path("/proc/self/status").read_text()).group(1))


def reset_peak_rss() -> None:
    Path("/proc/self/clear_refs").write_text("5")


def release_free_heap() -> None:
    """Return freed heap pages to the OS (glibc ``malloc_trim``), so that the resident size
    before a step counts live data only, not what the warm-up step freed."""
    import ctypes
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except OSError:
        pass


# ---------------------------------------------------------------- graph
def build_graph(hits_file: Path, k: int, window: float) -> dict:
    import pandas as pd

    from benchmarks.geometric_graph import layer_neighbour_graph
    from trkx.data.features import cylindrical
    hits = pd.read_csv(hits_file)
    r, phi, z, _ = cylindrical(hits.x.to_numpy(), hits.y.to_numpy(), hits.z.to_numpy())
    pos = torch.from_numpy(np.stack([r, phi, z], 1).astype(np.float32))
    layer = torch.from_numpy((hits.volume_id * 100 + hits.layer_id).to_numpy(np.int64).copy())
    edge_index = layer_neighbour_graph(pos, layer, k=k, d_eta=window, d_phi=window)
    x = torch.stack([pos[:, 0] / 1000, pos[:, 1] / math.pi, pos[:, 2] / 1000], 1)
    y = torch.rand(edge_index.shape[1], generator=torch.Generator().manual_seed(0)) < 0.2
    return {"pos": pos, "x": x, "edge_index": edge_index, "y": y.float()}


# ---------------------------------------------------------------- rank workers
def _init(rank: int, world: int, port: int) -> None:
    import torch.distributed as dist
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
    import torch.distributed as dist
    dist.destroy_process_group()


def step_worker(rank: int, world: int, port: int, graph_file: str, algorithm: str,
                partitioner: str, model_kwargs: dict, steps: int, threads: int,
                out_dir: str) -> None:
    """Training steps of InteractionGNN; world == 1: single process with CSR GraphOps."""
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
        gp = GraphParallel(algorithm, partitioner, 1)
        owner = g["owners"][f"{partitioner}|{world}"]
        part = gp.shard(edge_index, owner.numel(), owner=owner)
        ops, x, y = part.ops, x[part.nodes], y[part.edges]
    else:
        ops = CsrGraphOps(edge_index, x.shape[0])
    del g
    torch.manual_seed(0)
    model = InteractionGNN(3, **model_kwargs)
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
            import torch.distributed as dist
            dist.barrier()
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    result = {"times": times, "rss_before_kib": base, "peak_rss_kib": peak_rss_kib(),
              "runtime_rss_kib": runtime_rss}
    torch.save(result, Path(out_dir) / f"step{rank}.pt")
    if world > 1:
        import torch.distributed as dist
        dist.destroy_process_group()


def spawn(fn, nprocs: int, *args) -> None:
    torch.multiprocessing.spawn(fn, args=(nprocs, free_port(), *args), nprocs=nprocs,
                                join=True)


# ---------------------------------------------------------------- measurements
def measure_traffic(graph_file: Path, world_sizes: list[int], width: int, work: Path) -> dict:
    table = {}
    for P in world_sizes:
        configs = [(a, p, 1) for a in ("oblivious-1d", "sparse-1d") for p in PARTITIONERS]
        if P % 4 == 0:
            configs += [("1.5d", p, 2) for p in PARTITIONERS]
        t0 = time.perf_counter()
        spawn(traffic_worker, P, str(graph_file), configs, width, str(work))
        ranks = [torch.load(work / f"traffic{r}.pt", weights_only=True) for r in range(P)]
        for key in ranks[0]:
            per_rank = [sum(v["bytes_received"] for v in r[key].values()) for r in ranks]
            msgs = [sum(v["messages_received"] for v in r[key].values()) for r in ranks]
            algorithm, partitioner, c = key.split("|")
            name = algorithm if c == "1" else f"{algorithm}-c{c}"
            table.setdefault(name, {}).setdefault(partitioner, {})[str(P)] = {
                "total_bytes": sum(per_rank), "max_rank_bytes": max(per_rank),
                "max_rank_messages": max(msgs)}
        print(f"  traffic P={P}: {len(configs)} configs in {time.perf_counter() - t0:.1f} s",
              flush=True)
    return table


# glibc serves allocations above this many bytes with mmap and unmaps them on free, so the
# resident size follows the live tensors instead of the heap's high-water mark (without it,
# freed activations stay resident in fragmented arenas and the peak RSS says little)
MEMORY_ENV = {"MALLOC_MMAP_THRESHOLD_": "65536"}


def measure_steps(graph_file: Path, world: int, threads: int, model_kwargs: dict, steps: int,
                  work: Path, algorithm: str = "sparse-1d", partitioner: str = "sector",
                  env: dict[str, str] | None = None) -> dict:
    saved = {k: os.environ.get(k) for k in (env or {})}
    os.environ.update(env or {})
    try:
        spawn(step_worker, world, str(graph_file), algorithm, partitioner, model_kwargs, steps,
              threads, str(work))
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    ranks = [torch.load(work / f"step{r}.pt", weights_only=True) for r in range(world)]
    step_time = statistics.median(max(r["times"][i] for r in ranks) for i in range(steps))
    return {"step_time_s": step_time,
            "peak_rss_mib": [r["peak_rss_kib"] / 1024 for r in ranks],
            "peak_above_runtime_mib": [(r["peak_rss_kib"] - r["runtime_rss_kib"]) / 1024
                                       for r in ranks],
            "step_peak_increase_mib": [(r["peak_rss_kib"] - r["rss_before_kib"]) / 1024
                                       for r in ranks]}


# ---------------------------------------------------------------- main
def main() -> int:
    data = Path(os.environ.get("TRKX_DATA", REPO.parent / "shared" / "data" / "trackml"))
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hits", type=Path,
                        default=data / "kaggle_hits" / "event000001012-hits.csv.gz")
    parser.add_argument("--width", type=int, default=128, help="feature columns per exchange")
    parser.add_argument("--world-sizes", type=int, nargs="+", default=[2, 4, 8])
    parser.add_argument("--hidden", type=int, default=32, help="model width (memory/time)")
    parser.add_argument("--iters", type=int, default=4, help="model iterations (memory/time)")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--alpha", type=float, default=5e-6, help="latency per message (s)")
    parser.add_argument("--beta", type=float, default=25e9, help="bandwidth (bytes/s)")
    parser.add_argument("--gpu-speedup", type=float, default=100.0,
                        help="projection: ASSUMED accelerator compute speed over this CPU "
                             "(2 threads); nothing here is measured on a GPU")
    parser.add_argument("--skip-steps", action="store_true",
                        help="traffic and projection only (no memory / step-time runs)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if not args.hits.is_file():
        print(f"{args.hits}: hits file not found (set TRKX_DATA or --hits)", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="trkx_bench_dist_"))
    t0 = time.perf_counter()
    g = build_graph(args.hits, k=6, window=0.06)
    N, E = g["x"].shape[0], g["edge_index"].shape[1]
    print(f"graph: {args.hits.name}: {N} hits, {E} edges ({time.perf_counter() - t0:.1f} s)")
    owners = {}
    for P in sorted(set(args.world_sizes) | {P // 2 for P in args.world_sizes if P % 4 == 0}):
        for name in PARTITIONERS:
            owners[f"{name}|{P}"] = make_partition(name, P, g["edge_index"], g["pos"], N)
    graph_file = work / "graph.pt"
    torch.save({**g, "owners": owners}, graph_file)

    print("traffic per GNN iteration (gather + aggregate, forward + backward, "
          f"{args.width} fp32 columns):", flush=True)
    traffic = measure_traffic(graph_file, args.world_sizes, args.width, work)
    for name, by_part in traffic.items():
        for part, by_p in by_part.items():
            cells = "  ".join(f"P={p}: {v['total_bytes'] / 1e6:9.2f} MB" for p, v in
                              by_p.items())
            print(f"  {name:14s} {part:10s} {cells}")

    def ratio(P: int) -> float | None:
        try:
            return (traffic["sparse-1d"]["sector"][str(P)]["total_bytes"]
                    / traffic["oblivious-1d"]["sector"][str(P)]["total_bytes"])
        except KeyError:
            return None

    model = {"hidden": args.hidden, "n_graph_iters": args.iters, "n_mlp_layers": 1}
    single = four = None
    mem_ratio = abs_ratio = data_ratio = step_ratio = time_ratio = None
    one_proc, two_proc = [math.nan], [math.nan]
    if not args.skip_steps:
        print(f"memory: InteractionGNN {model}, sparse-1d + sector, {MEMORY_ENV}", flush=True)
        single = measure_steps(graph_file, 1, 1, model, args.steps, work, env=MEMORY_ENV)
        four = measure_steps(graph_file, 4, 1, model, args.steps, work, env=MEMORY_ENV)
        abs_ratio = max(four["peak_rss_mib"]) / single["peak_rss_mib"][0]
        mem_ratio = abs_ratio          # the target: whole-process peak per rank vs one process
        step_ratio = (max(four["step_peak_increase_mib"])
                      / single["step_peak_increase_mib"][0])
        data_ratio = (max(four["peak_above_runtime_mib"])
                      / single["peak_above_runtime_mib"][0])
        print(f"  single process: step peak +{single['step_peak_increase_mib'][0]:.0f} MiB "
              f"(peak RSS {single['peak_rss_mib'][0]:.0f} MiB)")
        print(f"  P=4 per rank:   step peak +{max(four['step_peak_increase_mib']):.0f} MiB "
              f"(peak RSS {max(four['peak_rss_mib']):.0f} MiB): whole-process peak RSS ratio "
              f"{abs_ratio:.3f}; above the torch runtime {data_ratio:.3f}; step increase "
              f"{step_ratio:.3f}")

        print("step time: 2 processes x 1 thread vs 1 process x 2 threads (alternating)",
              flush=True)
        two_proc, one_proc = [], []
        for _ in range(2):
            for world, threads, times in ((1, 2, one_proc), (2, 1, two_proc)):
                times.append(measure_steps(graph_file, world, threads, model, args.steps,
                                           work)["step_time_s"])
        time_ratio = statistics.median(two_proc) / statistics.median(one_proc)
        print(f"  1x2 threads: {statistics.median(one_proc):.3f} s  2x1: "
              f"{statistics.median(two_proc):.3f} s  ratio {time_ratio:.3f}")

    # projection for the production model (hidden 128, 8 iterations, 2-layer MLPs): compute
    # = the measured 1x2-thread step of the benchmark model scaled by the FLOP ratio and an
    # assumed accelerator speed-up; traffic = (T + 1) GNN iterations at width 128
    from trkx.gnn.model import InteractionGNN
    production = {"hidden": 128, "n_graph_iters": 8, "n_mlp_layers": 2}

    def flops(kwargs: dict) -> float:
        per_edge, per_node = InteractionGNN(3, **kwargs).flops_per_edge_and_node()
        return per_edge * E + per_node * N

    flop_ratio = flops(production) / flops(model)
    compute_gpu = statistics.median(one_proc) * flop_ratio / args.gpu_speedup
    iterations_per_step = production["n_graph_iters"] + 1
    formulas = {
        "oblivious-1d": "CAGNET 1D, per process per SpMM: alpha * P log P + beta * n f",
        "1.5d": "CAGNET 1.5D: alpha * ((P/c^2) log(P/c) + log c) + beta * (n f / c + 2 n f c / P)",
        "sparse-1d": "alpha * (neighbour blocks) + beta * |halo| f  (|halo| << n for sectors)"}
    # one exchange per gather/aggregate: (T + 2) gathers and T aggregates per step at width 128
    projection = project(g["edge_index"], g["pos"], N, args.width, compute_gpu, args.alpha,
                         args.beta, iterations_per_step)
    for name, formula in formulas.items():
        print(f"  model {name}: {formula}")
    print(f"projection of one training step of InteractionGNN {production} "
          f"({iterations_per_step} GNN iterations of traffic at width {args.width}); alpha "
          f"{args.alpha:g} s, beta {args.beta:g} B/s; compute = measured 1x2-thread step x "
          f"FLOP ratio {flop_ratio:.1f} / assumed speed-up {args.gpu_speedup:g} / P:")
    for P, rows in projection.items():
        for name, row in rows.items():
            print(f"  P={P:>3} {name:13s} {row['bytes'] / 1e6:9.3f} MB/rank "
                  f"{row['latency_steps']:6d} alpha  comm {row['comm_s'] * 1e3:8.3f} ms  "
                  f"compute {row['compute_s'] * 1e3:8.3f} ms  step {row['step_s'] * 1e3:8.3f} ms")
    result = {
        "graph": {"source": str(args.hits.name), "nodes": N, "edges": E,
                  "rule": "layer-neighbour k=6, |deta|,|dphi|<0.06 (stand-in for filtered "
                          "MU=200 graph)"},
        "width": args.width, "bytes": traffic,
        "sparse1d_sector_over_oblivious_p4": ratio(4),
        "sparse1d_sector_over_oblivious_p8": ratio(8),
        "peak_memory_ratio_p4": mem_ratio, "peak_rss_ratio_p4_whole_process": abs_ratio,
        "peak_rss_ratio_p4_above_runtime": data_ratio,
        "step_peak_increase_ratio_p4": step_ratio,
        "memory": {"single": single, "p4": four, "model": model},
        "step_time_ratio_2proc": time_ratio,
        "step_times": {"one_proc_two_threads": one_proc, "two_proc_one_thread": two_proc},
        "projection": {"alpha_s": args.alpha, "beta_bytes_per_s": args.beta,
                       "gpu_speedup_assumed": args.gpu_speedup, "flop_ratio": flop_ratio,
                       "model": production, "iterations_of_traffic": iterations_per_step,
                       "per_step": projection, "formulas": formulas},
    }
    print(f"sparse-1d+sector / oblivious-1d: P=4 {ratio(4)}, P=8 {ratio(8)}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
