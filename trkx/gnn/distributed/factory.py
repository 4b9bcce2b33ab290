"""Build a rank's distributed :class:`~trkx.gnn.graph_ops.GraphOps` for one event graph.

:class:`GraphParallel` is created once per run, after ``torch.distributed`` is initialised: it
fixes the :class:`~.layout.ProcessLayout` and creates the process groups (every rank creates
every group in the same order, as ``new_group`` requires). Per event graph,
:meth:`GraphParallel.shard` partitions the nodes into ``B = P / c`` blocks (deterministically,
identically on every rank), keeps this rank's block and returns its ``GraphOps`` together with
the global ids of its nodes and edges (to slice features and targets).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist
from torch import Tensor

from . import ALGORITHMS
from .comm import CommStats
from .layout import ProcessLayout
from .oblivious import Oblivious1dGraphOps
from .onefive import OneFiveDGraphOps
from .partition import make_partition
from .shard import GraphShard
from .sparse1d import Sparse1dGraphOps

DEFAULT_TIMEOUT_S = 60.0   # a stopped or dead rank makes the others raise after this long


@dataclass
class GraphPart:
    """This rank's share of one event graph."""

    ops: object                 # GraphOps
    shard: GraphShard
    owner: Tensor               # [N] block of every node (the partition)

    @property
    def nodes(self) -> Tensor:
        return self.shard.nodes

    @property
    def edges(self) -> Tensor:
        return self.shard.edges


class GraphParallel:
    """Process layout, process groups and communication counters of a distributed GNN run."""

    def __init__(self, algorithm: str = "sparse-1d", partitioner: str = "balanced",
                 replication: int = 1, timeout_s: float = DEFAULT_TIMEOUT_S,
                 overlap: bool = True) -> None:
        if algorithm not in ALGORITHMS:
            raise ValueError(f"unknown algorithm {algorithm!r}; choose one of "
                             f"{', '.join(ALGORITHMS)}")
        if algorithm != "1.5d" and replication != 1:
            raise ValueError(f"replication {replication} needs algorithm '1.5d', "
                             f"not {algorithm!r}")
        if not overlap and algorithm != "sparse-1d":
            raise ValueError(f"overlap false is a switch of sparse-1d, not {algorithm!r}")
        if not dist.is_initialized():
            raise RuntimeError("torch.distributed is not initialised: launch with torchrun "
                               "(or call init_process_group) before GraphParallel")
        self.algorithm, self.partitioner, self.overlap = algorithm, partitioner, overlap
        self.layout = ProcessLayout(dist.get_world_size(), dist.get_rank(), replication)
        self.stats = CommStats()
        timeout = timedelta(seconds=timeout_s)
        # a dedicated group keeps graph traffic apart from gradient all-reduces (DDP)
        self.graph_group = dist.new_group(list(range(self.layout.world_size)), timeout=timeout)
        self.row_group = self.column_group = None
        if algorithm == "1.5d":
            for i in range(self.layout.num_blocks):
                group = dist.new_group(self.layout.row_ranks(i), timeout=timeout)
                if i == self.layout.block:
                    self.row_group = group
            for j in range(self.layout.replication):
                group = dist.new_group(self.layout.column_ranks(j), timeout=timeout)
                if j == self.layout.replica:
                    self.column_group = group

    @property
    def replication(self) -> int:
        return self.layout.replication

    def partition(self, edge_index: Tensor, pos: Tensor | None, num_nodes: int) -> Tensor:
        return make_partition(self.partitioner, self.layout.num_blocks, edge_index, pos,
                              num_nodes)

    def shard(self, edge_index: Tensor, num_nodes: int, pos: Tensor | None = None,
              owner: Tensor | None = None) -> GraphPart:
        """This rank's :class:`GraphPart` of the graph ``edge_index`` over ``num_nodes``."""
        edge_index = edge_index.to(torch.int64).cpu()
        if owner is None:
            owner = self.partition(edge_index, None if pos is None else pos.cpu(), num_nodes)
        shard = GraphShard.build(edge_index, owner, self.layout.block, self.layout.num_blocks)
        return GraphPart(ops=self._ops(edge_index, shard), shard=shard, owner=owner)

    def _ops(self, edge_index: Tensor, shard: GraphShard):
        if self.algorithm == "sparse-1d":
            return Sparse1dGraphOps.build(edge_index, shard, self.graph_group, self.stats,
                                          self.overlap)
        if self.algorithm == "oblivious-1d":
            return Oblivious1dGraphOps(shard, self.graph_group,
                                       list(range(self.layout.world_size)), self.stats)
        return OneFiveDGraphOps(shard, self.layout, self.row_group, self.column_group,
                                self.stats)


def init_process_group(timeout_s: float = DEFAULT_TIMEOUT_S, backend: str | None = None) -> None:
    """``init_process_group`` from the torchrun environment: NCCL on CUDA, gloo on CPU, and a
    timeout so that a failed rank makes the others raise instead of hang."""
    if dist.is_initialized():
        return
    if backend is None:
        backend = "nccl" if torch.cuda.is_available() else "gloo"
    dist.init_process_group(backend=backend, timeout=timedelta(seconds=timeout_s))
