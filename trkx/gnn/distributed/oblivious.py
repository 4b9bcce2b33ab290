"""``oblivious-1d``: CAGNET's 1D algorithm, every node block broadcast in turn.

Block ``p`` owns nodes ``V_p`` and edges ``E_p``; split its source incidence by source block,
``S_p = [S_p0 | S_p1 | ... | S_p,P-1]`` (:mod:`.blocks`). For ``q = 0 .. P-1`` in turn:

    gather:     rank q broadcasts X_q;  every rank p sets the rows  S_pq X_q  of X_src
    aggregate:  every rank p computes   S_pq^T E_p;  the sum over p is reduced onto rank q
                (M_out of block q);  M_in = D_p^T E_p and X_dst = D_p X_p are local

Backward is the transposed communication: the gradient of a broadcast is a reduce onto the
root and vice versa. The algorithm ignores sparsity: per gather a rank receives every other
block, ``(N - n_p) f`` values; per aggregate the root of block ``q`` receives ``P - 1`` partial
sums of ``n_q f`` values.
"""

from __future__ import annotations

import torch.distributed as dist
from torch import Tensor
from torch.autograd import Function

from trkx.gnn.local_ops import Incidence

from .blocks import BlockExchange, SourceBlocks
from .comm import CommStats
from .shard import GraphShard, ShardGraphOps


class Oblivious1dGraphOps(ShardGraphOps):
    """:class:`~trkx.gnn.graph_ops.GraphOps` of one rank for ``oblivious-1d``."""

    def __init__(self, shard: GraphShard, group: dist.ProcessGroup | None,
                 ranks: list[int], stats: CommStats | None = None) -> None:
        self.shard, self.group, self.ranks = shard, group, ranks
        self.stats = stats if stats is not None else CommStats()
        blocks = range(shard.num_blocks)
        self.blocks = BlockExchange(shard, SourceBlocks(shard, blocks),
                                    {q: ranks[q] for q in blocks}, ranks, group, self.stats)
        self.dst = Incidence(shard.dst_local, shard.num_nodes)


class _ObliviousGather(Function):
    @staticmethod
    def forward(ctx, x: Tensor, ops: Oblivious1dGraphOps) -> tuple[Tensor, Tensor]:
        ctx.ops = ops
        x_src = x.new_zeros(ops.num_edges, x.shape[1])
        ops.blocks.spread(x, x_src, "gather.forward", accumulate=False)
        return x_src, ops.dst.apply(x)

    @staticmethod
    def backward(ctx, g_src: Tensor, g_dst: Tensor) -> tuple[Tensor, None]:
        ops: Oblivious1dGraphOps = ctx.ops
        g_x = ops.blocks.collect(g_src, "gather.backward")
        return g_x + ops.dst.apply_transposed(g_dst), None


class _ObliviousAggregate(Function):
    @staticmethod
    def forward(ctx, e: Tensor, ops: Oblivious1dGraphOps) -> tuple[Tensor, Tensor]:
        ctx.ops = ops
        m_out = ops.blocks.collect(e, "aggregate.forward")
        return ops.dst.apply_transposed(e), m_out

    @staticmethod
    def backward(ctx, g_in: Tensor, g_out: Tensor) -> tuple[Tensor, None]:
        ops: Oblivious1dGraphOps = ctx.ops
        g_e = ops.dst.apply(g_in)
        ops.blocks.spread(g_out, g_e, "aggregate.backward", accumulate=True)
        return g_e, None


Oblivious1dGraphOps._gather_fn = _ObliviousGather
Oblivious1dGraphOps._aggregate_fn = _ObliviousAggregate
