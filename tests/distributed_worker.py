"""Worker processes for the distributed GNN tests (gloo on CPU, float64).

Every rank builds the same small geometric graph, shards it with each algorithm and
partitioner, runs (a) a two-layer function made only of GraphOps calls and (b) the real
``InteractionGNN``, and saves its outputs, loss, parameter gradients and traffic counters for
the parent test to compare with the single-process results.
"""

from __future__ import annotations

import math
import os
import sys
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
from torch import Tensor, nn

HIDDEN = 6
BYTE_CHECK_WIDTH = 3


def make_graph(num_layers: int = 6, per_layer: int = 40, seed: int = 7):
    """Hits on ``num_layers`` cylinders; edges join hits on adjacent layers that are close in
    (phi, z): a small, geometrically local, directed (inner -> outer) detector-like graph."""
    g = torch.Generator().manual_seed(seed)
    n = num_layers * per_layer
    layer = torch.arange(n) // per_layer
    r = 30.0 * (layer + 1).double()
    phi = (torch.rand(n, generator=g, dtype=torch.float64) * 2 - 1) * math.pi
    z = (torch.rand(n, generator=g, dtype=torch.float64) * 2 - 1) * 100.0
    pos = torch.stack([r, phi, z], 1)
    dphi = torch.remainder(phi[None, :] - phi[:, None] + math.pi, 2 * math.pi) - math.pi
    close = (layer[None, :] == layer[:, None] + 1) & (dphi.abs() < 0.5) & (
        (z[None, :] - z[:, None]).abs() < 60.0)
    src, dst = torch.nonzero(close, as_tuple=True)
    edge_index = torch.stack([src, dst])
    x = torch.stack([r / 100.0, phi, z / 100.0], 1)
    y = torch.rand(edge_index.shape[1], generator=g, dtype=torch.float64) < 0.3
    return pos, x, edge_index, y.double()


class TwoLayer(nn.Module):
    """Two message-passing layers built only from ``ops.gather`` / ``ops.aggregate``."""

    def __init__(self, features: int = 3, hidden: int = HIDDEN) -> None:
        super().__init__()
        self.encode = nn.Linear(features, hidden)
        self.edge = nn.ModuleList(nn.Linear(3 * hidden if t else 2 * hidden, hidden)
                                  for t in range(2))
        self.node = nn.ModuleList(nn.Linear(3 * hidden, hidden) for _ in range(2))
        self.out = nn.Linear(3 * hidden, 1)

    def forward(self, x: Tensor, ops) -> Tensor:
        h = torch.tanh(self.encode(x))
        e = None
        for t in range(2):
            hs, hd = ops.gather(h)
            e = torch.tanh(self.edge[t](torch.cat([hs, hd] if e is None else [e, hs, hd], 1)))
            m_in, m_out = ops.aggregate(e)
            h = torch.tanh(self.node[t](torch.cat([m_in, m_out, h], 1)))
        hs, hd = ops.gather(h)
        return self.out(torch.cat([e, hs, hd], 1)).squeeze(1)


def make_models() -> dict[str, nn.Module]:
    from trkx.gnn.model import InteractionGNN
    torch.manual_seed(0)
    models = {"two_layer": TwoLayer(),
              "interaction_gnn": InteractionGNN(3, hidden=HIDDEN, n_graph_iters=2,
                                                n_mlp_layers=1),
              "interaction_gnn_mean": InteractionGNN(3, hidden=HIDDEN, n_graph_iters=2,
                                                     n_mlp_layers=1, aggregation="mean")}
    return {name: m.double() for name, m in models.items()}


def run_model(model: nn.Module, x: Tensor, y: Tensor, ops, total_edges: int,
              replication: int = 1) -> tuple[Tensor, float, dict[str, Tensor]]:
    """Edge logits, global mean BCE loss and summed parameter gradients."""
    from trkx.gnn.distributed.bookkeeping import all_reduce_gradients, rank_loss, reported_loss
    model.zero_grad()
    logits = model(x, ops)
    terms = nn.functional.binary_cross_entropy_with_logits(logits, y, reduction="none")
    loss = rank_loss(terms, total_edges, replication)
    loss.backward()
    all_reduce_gradients(model.parameters())
    grads = {name: p.grad.detach().clone() for name, p in model.named_parameters()}
    return logits.detach(), reported_loss(loss), grads


# (algorithm, partitioner, c, overlap): sparse-1d with the halo/compute overlap on and off
CONFIGS = {2: [("oblivious-1d", "contiguous", 1, True), ("sparse-1d", "sector", 1, True),
               ("sparse-1d", "balanced", 1, True), ("sparse-1d", "balanced", 1, False),
               ("1.5d", "contiguous", 1, True)],
           4: [("oblivious-1d", "sector", 1, True), ("sparse-1d", "sector", 1, True),
               ("sparse-1d", "contiguous", 1, True), ("sparse-1d", "sector", 1, False),
               ("1.5d", "sector", 2, True)]}


def worker(rank: int, world_size: int, port: int, out_dir: str) -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world_size, timeout=timedelta(seconds=60))
    try:
        from trkx.gnn.distributed.factory import GraphParallel
        pos, x, edge_index, y = make_graph()
        results = {}
        for algorithm, partitioner, c, overlap in CONFIGS[world_size]:
            gp = GraphParallel(algorithm, partitioner, c, timeout_s=60, overlap=overlap)
            part = gp.shard(edge_index, x.shape[0], pos)
            entry = {"nodes": part.nodes, "edges": part.edges, "owner": part.owner}
            for name, model in make_models().items():
                logits, loss, grads = run_model(model, x[part.nodes], y[part.edges], part.ops,
                                                edge_index.shape[1], c)
                entry[name] = {"logits": logits, "loss": loss, "grads": grads}
            # traffic of one gather + aggregate (forward and backward) at a known width
            gp.stats.reset()
            h = torch.randn(part.ops.num_nodes, BYTE_CHECK_WIDTH, dtype=torch.float64,
                            generator=torch.Generator().manual_seed(part.shard.block),
                            requires_grad=True)
            hs, hd = part.ops.gather(h)
            m_in, m_out = part.ops.aggregate(hs * hd)
            (m_in * m_out).sum().backward()
            entry["stats"] = gp.stats.snapshot()
            entry["num_sources"] = int(part.shard.src.unique().numel())
            results[f"{algorithm}|{partitioner}|{c}|{overlap}"] = entry
        torch.save(results, Path(out_dir) / f"rank{rank}.pt")
    finally:
        dist.destroy_process_group()


def failing_worker(rank: int, world_size: int, port: int) -> None:
    """Rank 1 dies before the first exchange; rank 0 must raise, not hang."""
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world_size, timeout=timedelta(seconds=5))
    from trkx.gnn.distributed.factory import GraphParallel
    gp = GraphParallel("sparse-1d", "sector", 1, timeout_s=5)
    pos, x, edge_index, _ = make_graph()
    part = gp.shard(edge_index, x.shape[0], pos)
    if rank == 1:
        raise SystemExit(3)
    part.ops.gather(x[part.nodes])


if __name__ == "__main__":
    failing_worker(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]))
