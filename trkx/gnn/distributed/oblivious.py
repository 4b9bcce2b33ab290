"""``oblivious-1d``: CAGNET's 1D algorithm, every node block broadcast in turn.

Block ``p`` owns nodes ``V_p`` and edges ``E_p``; split its source incidence by source block,
``S_p = [S_p0 | S_p1 | ... | S_p,P-1]``. For ``q = 0 .. P-1`` in turn:

    gather:     rank q broadcasts X_q;  every rank p sets the rows  S_pq X_q  of X_src
    aggregate:  every rank p computes   S_pq^T E_p;  the sum over p is reduced onto rank q
                (M_out of block q);  M_in = D_p^T E_p and X_dst = D_p X_p are local

Backward is the transposed communication: the gradient of a broadcast is a reduce onto the
root and vice versa. The algorithm ignores sparsity: per gather a rank receives every other
block, ``(N - n_p) f`` values; per aggregate the root of block ``q`` receives ``P - 1`` partial
sums of ``n_q f`` values.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import Tensor
from torch.autograd import Function

from .comm import CommStats, broadcast, reduce_sum
from .local import Incidence
from .shard import GraphShard, ShardGraphOps


class SourceBlocks:
    """``S_pq`` for every source block ``q``: (rows, incidence into block ``q``).

    Rows are edges (``S_pq``) or, with :meth:`of_nodes`, distinct source nodes (``R_pq``)."""

    def __init__(self, shard: GraphShard, blocks: range | list[int]) -> None:
        self.blocks: dict[int, tuple[Tensor, Incidence]] = {}
        for q in blocks:
            rows, cols = shard.edges_from(q)
            self.blocks[q] = (rows, Incidence(cols, shard.block_sizes[q]))

    @classmethod
    def of_nodes(cls, nodes: Tensor, shard: GraphShard, blocks: range | list[int]
                 ) -> SourceBlocks:
        """Rows are the global ``nodes``: ``R_pq[u, a] = 1`` when ``nodes[u]`` is node ``a``
        of block ``q``."""
        self = cls.__new__(cls)
        self.blocks = {}
        owner = shard.owner[nodes]
        for q in blocks:
            rows = torch.nonzero(owner == q).flatten()
            self.blocks[q] = (rows, Incidence(shard.local_index[nodes[rows]],
                                              shard.block_sizes[q]))
        return self

    def set_rows(self, out: Tensor, q: int, x_q: Tensor) -> None:
        """``out[rows] = S_pq X_q`` (each edge has one source, so rows are disjoint)."""
        rows, inc = self.blocks[q]
        out.index_copy_(0, rows.to(out.device), inc.apply(x_q))

    def add_rows(self, out: Tensor, q: int, g_q: Tensor) -> None:
        rows, inc = self.blocks[q]
        out.index_add_(0, rows.to(out.device), inc.apply(g_q))

    def transposed(self, q: int, e: Tensor) -> Tensor:
        """``S_pq^T E``: [n_q, f]."""
        rows, inc = self.blocks[q]
        return inc.apply_transposed(e.index_select(0, rows.to(e.device)))


class Oblivious1dGraphOps(ShardGraphOps):
    """:class:`~trkx.gnn.graph_ops.GraphOps` of one rank for ``oblivious-1d``."""

    def __init__(self, shard: GraphShard, group: dist.ProcessGroup | None,
                 ranks: list[int], stats: CommStats | None = None) -> None:
        self.shard, self.group, self.ranks = shard, group, ranks
        self.stats = stats if stats is not None else CommStats()
        self.sources = SourceBlocks(shard, range(shard.num_blocks))
        self.dst = Incidence(shard.dst_local, shard.num_nodes)

    def block_buffer(self, q: int, mine: Tensor) -> Tensor:
        if q == self.shard.block:
            return mine.contiguous()
        return mine.new_empty(self.shard.block_sizes[q], mine.shape[1])

    def broadcast_blocks(self, x: Tensor, out: Tensor, op: str, accumulate: bool) -> None:
        """For every block q in turn: broadcast it and write/add ``S_pq X_q`` into ``out``."""
        for q in range(self.shard.num_blocks):
            buf = self.block_buffer(q, x)
            broadcast(self.stats, op, buf, self.ranks[q], self.ranks, self.group)
            (self.sources.add_rows if accumulate else self.sources.set_rows)(out, q, buf)

    def reduce_blocks(self, e: Tensor, op: str) -> Tensor:
        """``sum_p S_pq^T E_p`` reduced onto every block's owner; returns this rank's block."""
        mine = None
        for q in range(self.shard.num_blocks):
            partial = self.sources.transposed(q, e).contiguous()
            reduce_sum(self.stats, op, partial, self.ranks[q], self.ranks, self.group)
            if q == self.shard.block:
                mine = partial
        return mine


class _ObliviousGather(Function):
    @staticmethod
    def forward(ctx, x: Tensor, ops: Oblivious1dGraphOps) -> tuple[Tensor, Tensor]:
        ctx.ops = ops
        x_src = x.new_zeros(ops.num_edges, x.shape[1])
        ops.broadcast_blocks(x, x_src, "gather.forward", accumulate=False)
        return x_src, ops.dst.apply(x)

    @staticmethod
    def backward(ctx, g_src: Tensor, g_dst: Tensor) -> tuple[Tensor, None]:
        ops: Oblivious1dGraphOps = ctx.ops
        g_x = ops.reduce_blocks(g_src, "gather.backward")
        return g_x + ops.dst.apply_transposed(g_dst), None


class _ObliviousAggregate(Function):
    @staticmethod
    def forward(ctx, e: Tensor, ops: Oblivious1dGraphOps) -> tuple[Tensor, Tensor]:
        ctx.ops = ops
        m_out = ops.reduce_blocks(e, "aggregate.forward")
        return ops.dst.apply_transposed(e), m_out

    @staticmethod
    def backward(ctx, g_in: Tensor, g_out: Tensor) -> tuple[Tensor, None]:
        ops: Oblivious1dGraphOps = ctx.ops
        g_e = ops.dst.apply(g_in)
        ops.broadcast_blocks(g_out, g_e, "aggregate.backward", accumulate=True)
        return g_e, None


__all__ = ["Oblivious1dGraphOps", "SourceBlocks"]


Oblivious1dGraphOps._gather_fn = _ObliviousGather
Oblivious1dGraphOps._aggregate_fn = _ObliviousAggregate
