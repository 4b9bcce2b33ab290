"""``1.5d``: CAGNET's 1.5D algorithm with replication ``c`` (see :mod:`.layout`).

The nodes are split into ``B = P / c`` blocks; block ``i`` with its edges ``E_i`` (destination
in block ``i``) and its node and edge features is replicated on the ``c`` ranks of row group
``i``. Let ``U_i`` be the distinct sources of ``E_i`` and factor ``S_i = S'_i R_i`` with
``R_i`` (``|U_i| x N``) selecting those sources and ``S'_i`` (``E_i x |U_i|``) local. Rank
``(i, j)`` handles the source blocks ``q`` of chunk ``j`` (``B / c`` of them):

    gather:     for q in chunk j: rank (q, j) broadcasts X_q in column group j;
                rank (i, j) writes the rows R_iq X_q of a partial X_U (|U_i| x f), zero
                elsewhere; all_reduce of X_U in row group i; X_src = S'_i X_U (local)
                X_dst = D_i X_i is local
    aggregate:  M_U = S'_i^T E_i (local); for q in chunk j: R_iq^T M_U reduced onto rank (q, j)
                in column group j; rank (i, j(i)) (j(i): the chunk holding i) now has M_out
                of block i and broadcasts it in row group i;   M_in = D_i^T E_i is local

Backward runs the adjoint collectives in reverse: broadcast <-> reduce, all_reduce <-> itself.
Replicas compute identical forward values; their gradient contributions differ but sum to the
true gradient, so the loss of each replica is weighted ``1 / c`` and parameter gradients are
summed over all ``P`` ranks (:mod:`.bookkeeping`).

Per gather a rank receives ``(B/c) n_q f ~ N f / c`` values by broadcast plus ``2 (c-1)/c``
times ``|U_i| f`` in the row all_reduce: CAGNET's ``n f / c + 2 n f c / P``, since
``|U_i| ~ n c / P`` on a geometrically local graph (reducing in the source space ``U_i``
instead of the edge space ``E_i`` saves the edges-per-node factor). ``P`` must be divisible
by ``c^2``.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import Tensor
from torch.autograd import Function

from trkx.gnn.local_ops import Incidence

from .blocks import BlockExchange, SourceBlocks
from .comm import CommStats, all_reduce_sum, broadcast, reduce_sum
from .layout import ProcessLayout
from .shard import GraphShard, ShardGraphOps


class OneFiveDGraphOps(ShardGraphOps):
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
        self.stats = stats if stats is not None else CommStats()
        unique_sources, source_of_edge = torch.unique(shard.src, return_inverse=True)
        self.to_edges = Incidence(source_of_edge, unique_sources.numel())   # S'_i
        chunk = layout.chunk(layout.replica)
        self.blocks = BlockExchange(                                           # R_iq, q in chunk
            shard, SourceBlocks.of_nodes(unique_sources, shard, chunk),
            {q: layout.rank_of(q, layout.replica) for q in chunk},
            layout.column_ranks(layout.replica), column_group, self.stats)
        self.dst = Incidence(shard.dst_local, shard.num_nodes)

    @property
    def num_sources(self) -> int:
        """``|U_i|``: distinct sources of this block's edges (rows of the row all_reduce)."""
        return self.to_edges.num_cols

    def _row_root(self) -> int:
        i = self.layout.block
        return self.layout.rank_of(i, self.layout.chunk_owner(i))

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
        partial = x.new_zeros(ops.num_sources, x.shape[1])
        ops.blocks.spread(x, partial, "gather.forward", accumulate=False)
        x_u = ops.row_all_reduce(partial, "gather.forward")
        return ops.to_edges.apply(x_u), ops.dst.apply(x)

    @staticmethod
    def backward(ctx, g_src: Tensor, g_dst: Tensor) -> tuple[Tensor, None]:
        ops: OneFiveDGraphOps = ctx.ops
        g = ops.row_all_reduce(ops.to_edges.apply_transposed(g_src), "gather.backward")
        g_x = ops.dst.apply_transposed(g_dst)
        mine = ops.blocks.collect(g, "gather.backward")
        return (g_x if mine is None else g_x + mine), None


class _OneFiveAggregate(Function):
    @staticmethod
    def forward(ctx, e: Tensor, ops: OneFiveDGraphOps) -> tuple[Tensor, Tensor]:
        ctx.ops = ops
        mine = ops.blocks.collect(ops.to_edges.apply_transposed(e), "aggregate.forward")
        m_out = ops.row_broadcast(mine, e, "aggregate.forward")
        return ops.dst.apply_transposed(e), m_out

    @staticmethod
    def backward(ctx, g_in: Tensor, g_out: Tensor) -> tuple[Tensor, None]:
        ops: OneFiveDGraphOps = ctx.ops
        g = ops.row_reduce(g_out, "aggregate.backward")
        g_u = g_in.new_zeros(ops.num_sources, g_in.shape[1])
        ops.blocks.spread(g, g_u, "aggregate.backward", accumulate=False)
        return ops.dst.apply(g_in) + ops.to_edges.apply(g_u), None


OneFiveDGraphOps._gather_fn = _OneFiveGather
OneFiveDGraphOps._aggregate_fn = _OneFiveAggregate
