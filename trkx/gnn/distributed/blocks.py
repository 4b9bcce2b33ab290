"""Whole-block broadcasts and reduces: the exchange shared by ``oblivious-1d`` and ``1.5d``.

Block ``p`` owns edges ``E_p``; split its source incidence by source block,
``S_p = [S_p0 | S_p1 | ... | S_p,B-1]`` (:class:`SourceBlocks`; with :meth:`SourceBlocks.of_nodes`
the rows are distinct source nodes ``R_pq`` instead of edges). For a list of source blocks
``Q`` served by the ranks ``ranks`` of one process group (rank ``ranks[q]`` of the group holds
block ``q``), :class:`BlockExchange` runs, for ``q in Q`` in turn,

    spread:   ranks[q] broadcasts X_q;  every rank writes (or adds) the rows  S_pq X_q
    collect:  every rank computes S_pq^T E_p;  the sum over the group is reduced onto ranks[q]

``spread`` and ``collect`` are each other's adjoint (the gradient of a broadcast is a reduce
onto its root and vice versa). ``oblivious-1d`` runs them over every block in the whole world;
``1.5d`` over the chunk of blocks of its replica inside its column group.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.distributed as dist
from torch import Tensor

from trkx.gnn.local_ops import Incidence

from .comm import CommStats, broadcast, reduce_sum
from .shard import GraphShard


class SourceBlocks:
    """``S_pq`` for every source block ``q``: (rows, incidence into block ``q``)."""

    def __init__(self, shard: GraphShard, blocks: Sequence[int]) -> None:
        self.blocks: dict[int, tuple[Tensor, Incidence]] = {}
        for q in blocks:
            rows, cols = shard.edges_from(q)
            self.blocks[q] = (rows, Incidence(cols, shard.block_sizes[q]))

    @classmethod
    def of_nodes(cls, nodes: Tensor, shard: GraphShard, blocks: Sequence[int]
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
        """``out[rows] = S_pq X_q`` (each row has one source, so rows are disjoint)."""
        rows, inc = self.blocks[q]
        out.index_copy_(0, rows.to(out.device), inc.apply(x_q))

    def add_rows(self, out: Tensor, q: int, g_q: Tensor) -> None:
        """``out[rows] += S_pq G_q``."""
        rows, inc = self.blocks[q]
        out.index_add_(0, rows.to(out.device), inc.apply(g_q))

    def transposed(self, q: int, e: Tensor) -> Tensor:
        """``S_pq^T E``: [n_q, f]."""
        rows, inc = self.blocks[q]
        return inc.apply_transposed(e.index_select(0, rows.to(e.device)))


class BlockExchange:
    """``spread`` / ``collect`` of the blocks ``sources.blocks`` over one process group.

    Args:
        shard: this rank's block (its number and every block's size).
        sources: the ``S_pq`` (or ``R_pq``) of the blocks exchanged, in exchange order.
        roots: global rank holding block ``q`` in the group, for every ``q`` exchanged.
        ranks: the global ranks of the group.
        group: the process group (None: the default group).
        stats: traffic counters.
    """

    def __init__(self, shard: GraphShard, sources: SourceBlocks, roots: dict[int, int],
                 ranks: Sequence[int], group: dist.ProcessGroup | None,
                 stats: CommStats) -> None:
        self.shard, self.sources, self.roots = shard, sources, roots
        self.ranks, self.group, self.stats = list(ranks), group, stats

    def _buffer(self, q: int, mine: Tensor) -> Tensor:
        if q == self.shard.block:
            return mine.contiguous()
        return mine.new_empty(self.shard.block_sizes[q], mine.shape[1])

    def spread(self, x: Tensor, out: Tensor, op: str, accumulate: bool) -> None:
        """For every block ``q``: broadcast ``X_q`` and write (or add) ``S_pq X_q`` to ``out``."""
        for q in self.sources.blocks:
            buf = self._buffer(q, x)
            broadcast(self.stats, op, buf, self.roots[q], self.ranks, self.group)
            (self.sources.add_rows if accumulate else self.sources.set_rows)(out, q, buf)

    def collect(self, e: Tensor, op: str) -> Tensor | None:
        """``sum_p S_pq^T E_p`` reduced onto every block's root; this rank's block when it is
        one of the exchanged blocks, else None."""
        mine = None
        for q in self.sources.blocks:
            partial = self.sources.transposed(q, e).contiguous()
            reduce_sum(self.stats, op, partial, self.roots[q], self.ranks, self.group)
            if q == self.shard.block:
                mine = partial
        return mine
