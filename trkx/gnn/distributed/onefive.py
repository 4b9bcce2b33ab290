"""``1.5d``: CAGNET's 1.5D algorithm with replication ``c`` (see :mod:`.layout`).

The nodes are split into ``B = P / c`` blocks; block ``i`` with its edges ``E_i`` (destination
in block ``i``) and its node and edge features is replicated on the ``c`` ranks of row group
``i``. Rank ``(i, j)`` handles the source blocks ``q`` of chunk ``j`` (``B / c`` of them):

    gather:     for q in chunk j: rank (q, j) broadcasts X_q in column group j;
                rank (i, j) writes the rows S_iq X_q of a partial X_src, zero elsewhere;
                all_reduce of the partial X_src in row group i       -> X_src = S_i X
                X_dst = D_i X_i is local
    aggregate:  for q in chunk j: S_iq^T E_i reduced onto rank (q, j) in column group j;
                rank (i, j(i)) (j(i): the chunk holding i) now has M_out of block i and
                broadcasts it in row group i;        M_in = D_i^T E_i is local

Backward runs the adjoint collectives in reverse: broadcast <-> reduce, all_reduce <-> itself.
Replicas compute identical forward values; their gradient contributions differ but sum to the
true gradient, so the loss of each replica is weighted ``1 / c`` and parameter gradients are
summed over all ``P`` ranks (:mod:`.bookkeeping`).

Per gather a rank receives ``(B/c) n_q f ~ N f / c`` values by broadcast plus ``2 (c-1)/c``
times its ``E_i x f`` partial in the row all_reduce (CAGNET: ``n f / c + 2 n f c / P`` for an
``n x n`` operator; here the operator's output space is the edges). ``P`` must be divisible
by ``c^2``.
"""

from __future__ import annotations

import torch.distributed as dist
from torch import Tensor
from torch.autograd import Function

from .comm import CommStats, all_reduce_sum, broadcast, reduce_sum
from .layout import ProcessLayout
from .local import Incidence
from .oblivious import SourceBlocks
from .shard import GraphShard


class OneFiveDGraphOps:
    """:class:`~trkx.gnn.graph_ops.GraphOps` of rank ``(i, j)`` for ``1.5d``."""

    def __init__(self, shard: GraphShard, layout: ProcessLayout,
                 row_group: dist.ProcessGroup | None, column_group: dist.ProcessGroup | None,
                 stats: CommStats | None = None) -> None:
        if shard.block != layout.block or shard.num_blocks != layout.num_blocks:
            raise ValueError(f"shard of block {shard.block}/{shard.num_blocks} does not match "
                             f"the layout ({layout.describe()})")
        self.shard, self.layout = shard, layout
        self.row_group, self.column_group = row_group, column_group
        self.row_ranks = layout.row_ranks(layout.block)
        self.column_ranks = layout.column_ranks(layout.replica)
        self.chunk = layout.chunk(layout.replica)
        self.stats = stats if stats is not None else CommStats()
        self.sources = SourceBlocks(shard, self.chunk)
        self.dst = Incidence(shard.dst_local, shard.num_nodes)

    @property
    def num_nodes(self) -> int:
        return self.shard.num_nodes

    @property
    def num_edges(self) -> int:
        return self.shard.num_edges

    def gather(self, x: Tensor) -> tuple[Tensor, Tensor]:
        return _OneFiveGather.apply(x, self)

    def aggregate(self, e: Tensor) -> tuple[Tensor, Tensor]:
        return _OneFiveAggregate.apply(e, self)

    def _column_root(self, q: int) -> int:
        return self.layout.rank_of(q, self.layout.replica)

    def _row_root(self) -> int:
        i = self.layout.block
        return self.layout.rank_of(i, self.layout.chunk_owner(i))

    def _block_buffer(self, q: int, mine: Tensor) -> Tensor:
        if q == self.layout.block:
            return mine.contiguous()
        return mine.new_empty(self.shard.block_sizes[q], mine.shape[1])

    def broadcast_chunk(self, x: Tensor, out: Tensor, op: str, accumulate: bool) -> None:
        for q in self.chunk:
            buf = self._block_buffer(q, x)
            broadcast(self.stats, op, buf, self._column_root(q), self.column_ranks,
                      self.column_group)
            (self.sources.add_rows if accumulate else self.sources.set_rows)(out, q, buf)

    def reduce_chunk(self, e: Tensor, op: str) -> Tensor | None:
        mine = None
        for q in self.chunk:
            partial = self.sources.transposed(q, e).contiguous()
            reduce_sum(self.stats, op, partial, self._column_root(q), self.column_ranks,
                       self.column_group)
            if q == self.layout.block:
                mine = partial
        return mine

    def row_all_reduce(self, t: Tensor, op: str) -> Tensor:
        t = t.contiguous().clone()
        all_reduce_sum(self.stats, op, t, self.row_ranks, self.row_group)
        return t

    def row_broadcast(self, mine: Tensor | None, like: Tensor, op: str) -> Tensor:
        buf = mine if mine is not None else like.new_empty(self.num_nodes, like.shape[1])
        broadcast(self.stats, op, buf, self._row_root(), self.row_ranks, self.row_group)
        return buf

    def row_reduce(self, t: Tensor, op: str) -> Tensor:
        t = t.clone().contiguous()
        reduce_sum(self.stats, op, t, self._row_root(), self.row_ranks, self.row_group)
        return t


class _OneFiveGather(Function):
    @staticmethod
    def forward(ctx, x: Tensor, ops: OneFiveDGraphOps) -> tuple[Tensor, Tensor]:
        ctx.ops = ops
        partial = x.new_zeros(ops.num_edges, x.shape[1])
        ops.broadcast_chunk(x, partial, "gather.forward", accumulate=False)
        return ops.row_all_reduce(partial, "gather.forward"), ops.dst.apply(x)

    @staticmethod
    def backward(ctx, g_src: Tensor, g_dst: Tensor) -> tuple[Tensor, None]:
        ops: OneFiveDGraphOps = ctx.ops
        g = ops.row_all_reduce(g_src, "gather.backward")
        g_x = ops.dst.apply_transposed(g_dst)
        mine = ops.reduce_chunk(g, "gather.backward")
        return (g_x if mine is None else g_x + mine), None


class _OneFiveAggregate(Function):
    @staticmethod
    def forward(ctx, e: Tensor, ops: OneFiveDGraphOps) -> tuple[Tensor, Tensor]:
        ctx.ops = ops
        mine = ops.reduce_chunk(e, "aggregate.forward")
        m_out = ops.row_broadcast(mine, e, "aggregate.forward")
        return ops.dst.apply_transposed(e), m_out

    @staticmethod
    def backward(ctx, g_in: Tensor, g_out: Tensor) -> tuple[Tensor, None]:
        ops: OneFiveDGraphOps = ctx.ops
        g = ops.row_reduce(g_out, "aggregate.backward")
        g_e = ops.dst.apply(g_in)
        ops.broadcast_chunk(g, g_e, "aggregate.backward", accumulate=True)
        return g_e, None
