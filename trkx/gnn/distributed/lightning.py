"""Lightning integration: graph-parallel training by changing one Trainer config line.

    trainer:
      strategy: graph_parallel          # was: ddp   (sparse-1d, edge-balanced partition)
      # or graph_parallel_oblivious, graph_parallel_sector, graph_parallel_1.5d_c2

:class:`GraphParallelStrategy` is Lightning's DDP strategy (same launchers, gloo on CPU, NCCL
on CUDA, DDP's gradient averaging) plus three things:

1. every rank receives *every* event (the distributed sampler is told there is one replica);
2. ``batch_to_device`` keeps the rank's block of the event: node attributes sliced to its
   nodes, edge attributes to its edges, and ``batch.graph_ops`` set to the distributed
   :class:`~trkx.gnn.graph_ops.GraphOps`;
3. the loss the module returns for its block, a (weighted) mean over the block's edges
   ``sum_{E_r} w l / W_r``, is rescaled by ``P W_r / (c W)`` so that DDP's averaged gradient
   is the single-process gradient of ``sum_E w l / W`` (:mod:`.bookkeeping`). ``W`` is the
   module's ``edge_loss_normaliser(batch)`` when it defines one (e.g. the sum of the edge
   weights), else the number of edges.

The module's contract: build its ops as ``getattr(batch, "graph_ops", None) or local_ops``,
return the (weighted) mean edge loss of the batch it is given, and, for a weighted mean,
define ``edge_loss_normaliser(batch) -> float`` (its ``sum_k w_k``). The strategy names are
registered by :func:`register_graph_parallel_strategy` (importing this module registers
nothing; the gnn CLI calls the hook when it imports the GNN).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
from pytorch_lightning.strategies import DDPStrategy, StrategyRegistry
from torch import Tensor

from trkx.data.record import EDGE_FIELDS
from trkx.data.record_type import Record

from .factory import DEFAULT_TIMEOUT_S, GraphParallel


def edge_count(batch: Record) -> float:
    return float(batch.edge_index.shape[1]) if "edge_index" in batch else float(
        batch.graph_ops.num_edges)


def per_edge(key: str, value: torch.Tensor, num_nodes: int, num_edges: int) -> bool:
    """A tensor of one row per edge: E rows, and when E = N, a per-edge field of the record
    contract or a name that says ``edge``."""
    if value.shape[0] != num_edges:
        return False
    return num_edges != num_nodes or key in EDGE_FIELDS or "edge" in key


def shard_event(data: Record, parallel: GraphParallel,
                normaliser: Callable[[Record], float] = edge_count) -> Record:
    """This rank's block of one event record, with ``graph_ops`` and ``loss_rescale`` set
    (``normaliser``: the loss's denominator for a batch, see the module docstring)."""
    edge_index = data.edge_index.cpu()
    num_nodes, num_edges = data.num_nodes, edge_index.shape[1]
    pos = data.pos.cpu() if "pos" in data else None
    part = parallel.shard(edge_index, num_nodes, pos)
    local = Record()
    for key, value in data.items():
        if key == "edge_index":
            continue
        if isinstance(value, torch.Tensor) and value.dim() > 0:
            if per_edge(key, value, num_nodes, num_edges):
                value = value[part.edges.to(value.device)]
            elif value.shape[0] == num_nodes:
                value = value[part.nodes.to(value.device)]
        local[key] = value
    local.num_nodes = part.ops.num_nodes
    local.graph_ops = part.ops
    local.global_nodes, local.global_edges = part.nodes, part.edges
    P, c = parallel.layout.world_size, parallel.replication
    total = float(normaliser(data))
    local.loss_rescale = P * float(normaliser(local)) / (c * total) if total > 0 else 0.0
    return local


def torchrun_nodes() -> int | None:
    """``WORLD_SIZE / LOCAL_WORLD_SIZE`` when torchrun started this process, else None."""
    world, local = os.environ.get("WORLD_SIZE"), os.environ.get("LOCAL_WORLD_SIZE")
    if world is None or local is None or int(local) < 1:
        return None
    return max(1, int(world) // int(local))


class GraphParallelStrategy(DDPStrategy):
    """DDP whose ranks share each event graph instead of splitting the dataset."""

    strategy_name = "graph_parallel"

    def __init__(self, algorithm: str = "sparse-1d", partitioner: str = "balanced",
                 replication: int = 1, timeout_s: float = DEFAULT_TIMEOUT_S,
                 overlap: bool = True, **ddp_kwargs: Any) -> None:
        ddp_kwargs.setdefault("timeout", timedelta(seconds=timeout_s))
        super().__init__(**ddp_kwargs)
        self.graph_settings = {"algorithm": algorithm, "partitioner": partitioner,
                               "replication": replication, "timeout_s": timeout_s,
                               "overlap": overlap}
        self.parallel: GraphParallel | None = None

    def setup_distributed(self) -> None:
        super().setup_distributed()
        self.parallel = GraphParallel(**self.graph_settings)

    @property
    def num_nodes(self) -> int:
        return self._num_nodes

    @num_nodes.setter
    def num_nodes(self, num_nodes: int) -> None:
        # under torchrun the launcher decided the nodes (the Trainer's num_nodes defaults to 1)
        self._num_nodes = torchrun_nodes() or num_nodes

    def setup(self, trainer: Any) -> None:
        if getattr(self.lightning_module, "signal_pt_power", 0.0) > 0:
            raise ValueError("GraphParallelStrategy: module.signal_pt_power weighs edges by "
                             "their hits' pT, which a rank's block does not carry: set it to 0")
        if getattr(self.lightning_module, "secondary_weight", 1.0) != 1.0:
            raise ValueError("GraphParallelStrategy: module.secondary_weight weighs edges by "
                             "their particles' production radius, which a rank's block does not "
                             "carry: set it to 1")
        super().setup(trainer)

    @property
    def distributed_sampler_kwargs(self) -> dict[str, Any]:
        return {"num_replicas": 1, "rank": 0}     # every rank sees every event

    def batch_to_device(self, batch: Any, device: torch.device | None = None,
                        dataloader_idx: int = 0) -> Any:
        if isinstance(batch, Record) and self.parallel is not None:
            model = getattr(self.lightning_module, "model", None)
            if getattr(model, "edge_features", 0) and "edge_inputs" not in batch:
                from trkx.gnn.edge_inputs import model_edge_inputs

                batch = batch.clone()   # edge inputs need the whole event's edge_index
                batch.edge_inputs = model_edge_inputs(model, batch)
            normaliser = getattr(self.lightning_module, "edge_loss_normaliser", edge_count)
            batch = shard_event(batch, self.parallel, normaliser)
        return super().batch_to_device(batch, device, dataloader_idx)

    def training_step(self, *args: Any, **kwargs: Any):
        output = super().training_step(*args, **kwargs)
        batch = args[0] if args else kwargs.get("batch")
        factor = getattr(batch, "loss_rescale", None)
        if factor is None:
            return output
        if isinstance(output, dict):
            return {**output, "loss": output["loss"] * factor}
        return output * factor

    def event_mean(self, value: Tensor, batch: Record) -> Tensor:
        """The whole-event value of a (weighted) mean over this rank's edges:
        ``sum_r value_r W_r / (c W)``, all-reduced (every rank returns it; no gradient)."""
        factor = getattr(batch, "loss_rescale", None)
        if factor is None or not dist.is_initialized():
            return value
        share = value.detach() * (factor / self.parallel.layout.world_size)
        dist.all_reduce(share, op=dist.ReduceOp.SUM)
        return share

    def gather_edge_rows(self, *tensors: Tensor) -> tuple[Tensor, ...]:
        """Every edge's rows once: the concatenation over the blocks of this rank's
        ``tensors`` (rows = its edges, any order), replica 0 of every block contributing
        (``1.5d`` replicas hold the same edges). Same result on every rank."""
        if not dist.is_initialized():
            return tensors
        contributes = self.parallel is None or self.parallel.layout.replica == 0
        return tuple(_all_gather_rows(t if contributes else t[:0]) for t in tensors)


STRATEGY_VARIANTS: dict[str, dict[str, Any]] = {
    "graph_parallel": {},
    "graph_parallel_oblivious": {"algorithm": "oblivious-1d"},
    "graph_parallel_sector": {"partitioner": "sector"},
    "graph_parallel_1.5d_c2": {"algorithm": "1.5d", "replication": 2},
}


def register_graph_parallel_strategy() -> tuple[str, ...]:
    """Register the strategy names of :data:`STRATEGY_VARIANTS` with Lightning's
    ``StrategyRegistry`` (idempotent) so that ``Trainer(strategy="graph_parallel")`` works;
    returns the names."""
    for name, settings in STRATEGY_VARIANTS.items():
        if name not in StrategyRegistry:
            StrategyRegistry.register(name, GraphParallelStrategy,
                                      description=f"graph-parallel GNN training {settings}",
                                      **settings)
    return tuple(STRATEGY_VARIANTS)


def _all_gather_rows(tensor: Tensor) -> Tensor:
    """Rows of ``tensor`` of every rank, concatenated in rank order (uneven row counts)."""
    world = dist.get_world_size()
    flag = tensor.dtype == torch.bool          # NCCL has no bool all_gather
    home = tensor.device
    device = (torch.device("cuda", torch.cuda.current_device())
              if dist.get_backend() == "nccl" else home)   # NCCL gathers device tensors
    local = (tensor.to(torch.uint8) if flag else tensor).to(device)
    count = torch.tensor([local.shape[0]], device=local.device)
    counts = [torch.zeros_like(count) for _ in range(world)]
    dist.all_gather(counts, count)
    longest = int(max(int(c) for c in counts))
    padded = local.new_zeros((longest,) + tuple(local.shape[1:]))
    padded[:local.shape[0]] = local
    parts = [torch.empty_like(padded) for _ in range(world)]
    dist.all_gather(parts, padded.contiguous())
    out = torch.cat([part[:int(c)] for part, c in zip(parts, counts)]).to(home)
    return out.bool() if flag else out
