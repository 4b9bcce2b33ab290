"""The rank side of benchmarks/distributed.py: the processes it spawns (gloo, CPU) and what it
measures with them: bytes per GNN iteration, training-step time and memory.

A spawned rank imports this module by name, so it holds nothing that runs at import.
"""

from __future__ import annotations

import statistics
import time
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
from harness import free_port, peak_rss_kib, release_free_heap, reset_peak_rss, rss_kib

PARTITIONERS = ("sector", "balanced", "refined")
DEFAULT = "balanced"


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
                out_dir: str, overlap: bool = True) -> None:
    """Training steps of InteractionGNN; world == 1: single process with CSR GraphOps. The
    ranks run under the allocator of trkx commands (trkx/runtime/allocator.py: the preload
    this benchmark re-executed itself under, inherited, else glibc's caching settings)."""
    from trkx.runtime import allocator as allocators

    if allocators.mapped_allocator() is None:
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
                  overlap: bool = True) -> dict:
    spawn(step_worker, world, str(graph_file), algorithm, partitioner, model_kwargs, steps,
          threads, str(work), overlap)
    ranks = [torch.load(work / f"step{r}.pt", weights_only=True) for r in range(world)]
    step_time = statistics.median(max(r["times"][i] for r in ranks) for i in range(steps))
    return {"step_time_s": step_time,
            "peak_rss_mib": [r["peak_rss_kib"] / 1024 for r in ranks],
            "peak_above_runtime_mib": [(r["peak_rss_kib"] - r["runtime_rss_kib"]) / 1024
                                       for r in ranks],
            "step_peak_increase_mib": [(r["peak_rss_kib"] - r["rss_before_kib"]) / 1024
                                       for r in ranks]}
