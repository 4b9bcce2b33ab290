"""``sparse-1d``: sparsity-aware 1D distribution, only the halo rows move.

Block ``p`` owns nodes ``V_p`` and edges ``E_p`` (destination in ``V_p``), so ``D_p X`` and
``D_p^T E`` are local. Write ``S_p = [S_pp | S_pH]`` over local nodes and the halo ``H_p``
(distinct remote sources, ordered by owner then global id). Then

    gather:     X_src = S_pp X_p + S_pH X_H        X_H received: ONE all_to_all_single
                X_dst = D_p X_p
    aggregate:  M_H   = S_pH^T E_p                  partial sums for remote sources, sent first
                M_in  = D_p^T E_p
                M_out = S_pp^T E_p + sum of the M_H rows other blocks computed for V_p
                                                    returned in ONE all_to_all_single

Backward is the transposed exchange: the gradient of a gather returns halo partial sums to
their owners (``S_pH^T G_src``), the gradient of an aggregate fetches the halo rows of
``dM_out``.

Overlap. Every exchange starts (``async_op=True``) as soon as what it sends exists, and the
rank computes everything that does not need the halo while it is in flight: in the gather
``D_p X_p`` and ``S_pp X_p`` (edges with an own source), in the aggregation ``D_p^T E_p`` and
``S_pp^T E_p`` (the halo part ``S_pH^T E_p`` is computed first, it is what is sent), and the
same in both backward passes. Only ``S_pH`` products wait for the exchange. With
``overlap=False`` each exchange completes before any of that local work (the same arithmetic in
the same order; the switch exists to measure what overlapping buys).
Only the source side crosses ranks (destinations are owned), so each gather, aggregate and
each backward is exactly one ``all_to_all_single`` with split sizes (gloo cannot do uneven list
``all_to_all``). Per exchange a rank receives ``|H_p| f`` values, at most ``(N - n_p) f``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import Tensor
from torch.autograd import Function

from trkx.gnn.local_ops import Incidence

from .comm import CommStats, all_to_all_rows
from .shard import GraphShard, ShardGraphOps


@dataclass(frozen=True)
class HaloPlan:
    """Who sends which rows to whom, for block ``shard.block``."""

    recv_splits: tuple[int, ...]   # halo rows received from every block
    send_splits: tuple[int, ...]   # rows sent to every block
    send_index: Tensor             # local rows sent, grouped by destination block
    halo_nodes: Tensor             # global ids of the halo, grouped by owner
    src_extended: Tensor           # [E_p] source index into [own nodes ; halo]

    @classmethod
    def build(cls, edge_index: Tensor, shard: GraphShard) -> HaloPlan:
        n, B, me = shard.total_nodes, shard.num_blocks, shard.block
        owner, src_all, dst_all = shard.owner, edge_index[0].long(), edge_index[1].long()
        cross = owner[src_all] != owner[dst_all]
        # every (needing block, remote source) pair, sorted by needing block, owner, global id
        keys = torch.unique(owner[dst_all[cross]] * n + src_all[cross])
        needer, node = keys // n, keys % n
        mine_recv = needer == me
        halo = node[mine_recv]
        halo = halo[torch.argsort(owner[halo] * n + halo)]
        recv_splits = torch.bincount(owner[halo], minlength=B)
        mine_send = owner[node] == me
        send_to, send_nodes = needer[mine_send], node[mine_send]   # sorted by (needer, id)
        send_splits = torch.bincount(send_to, minlength=B)
        src_ext = shard.local_index[shard.src].clone()
        remote = shard.source_blocks() != me
        halo_key = owner[halo] * n + halo
        src_ext[remote] = shard.num_nodes + torch.searchsorted(
            halo_key, owner[shard.src[remote]] * n + shard.src[remote])
        return cls(recv_splits=tuple(int(v) for v in recv_splits),
                   send_splits=tuple(int(v) for v in send_splits),
                   send_index=shard.local_index[send_nodes], halo_nodes=halo,
                   src_extended=src_ext)

    @property
    def num_halo(self) -> int:
        return self.halo_nodes.numel()


class Sparse1dGraphOps(ShardGraphOps):
    """:class:`~trkx.gnn.graph_ops.GraphOps` of one rank for the ``sparse-1d`` algorithm.

    The source incidence is kept as two row blocks of the ``E_p``-row matrix: ``src_own``
    (``S_pp``, edges whose source is an own node) and ``src_halo`` (``S_pH``, sources in the
    halo, indexed into the received rows)."""

    def __init__(self, shard: GraphShard, plan: HaloPlan, group: dist.ProcessGroup | None,
                 stats: CommStats | None = None, overlap: bool = True) -> None:
        self.shard, self.plan, self.group = shard, plan, group
        self.stats = stats if stats is not None else CommStats()
        self.overlap = overlap
        n, num_edges = shard.num_nodes, shard.num_edges
        own = plan.src_extended < n
        self.own_rows = torch.nonzero(own).flatten()
        self.halo_rows = torch.nonzero(~own).flatten()
        self.src_own = Incidence(plan.src_extended[self.own_rows], n, rows=self.own_rows,
                                 total_rows=num_edges)
        self.src_halo = Incidence(plan.src_extended[self.halo_rows] - n, plan.num_halo,
                                  rows=self.halo_rows, total_rows=num_edges)
        self.dst = Incidence(shard.dst_local, n)

    @classmethod
    def build(cls, edge_index: Tensor, shard: GraphShard, group: dist.ProcessGroup | None,
              stats: CommStats | None = None, overlap: bool = True) -> Sparse1dGraphOps:
        return cls(shard, HaloPlan.build(edge_index, shard), group, stats, overlap)

    # the two exchanges, shared by forward and backward passes
    def _started(self, received: Tensor, work: dist.Work | None
                 ) -> tuple[Tensor, dist.Work | None]:
        if not self.overlap and work is not None:
            work.wait()               # overlap off: the exchange ends before any local work
            return received, None
        return received, work

    def fetch_halo(self, x: Tensor, op: str) -> tuple[Tensor, dist.Work | None]:
        """Start receiving the halo rows of ``x`` (owners send ``x[send_index]``)."""
        return self._started(*all_to_all_rows(
            self.stats, op, x.index_select(0, self.plan.send_index.to(x.device)),
            self.plan.send_splits, self.plan.recv_splits, self.shard.block, self.group,
            async_op=True))

    def return_halo(self, halo_rows: Tensor, op: str) -> tuple[Tensor, dist.Work | None]:
        """Start sending halo partial sums back to their owners."""
        return self._started(*all_to_all_rows(
            self.stats, op, halo_rows, self.plan.recv_splits, self.plan.send_splits,
            self.shard.block, self.group, async_op=True))

    def add_returned(self, target: Tensor, returned: Tensor) -> Tensor:
        return target.index_add(0, self.plan.send_index.to(target.device), returned)

    def edge_rows(self, own: Tensor, halo: Tensor | None, like: Tensor) -> Tensor:
        """``[E_p, f]`` from the own-source rows ``own`` (``halo``: None, filled later)."""
        out = like.new_empty((self.num_edges, own.shape[1]), dtype=own.dtype)
        out.index_copy_(0, self.own_rows.to(out.device), own)
        if halo is not None:
            out.index_copy_(0, self.halo_rows.to(out.device), halo)
        return out


def _wait(work: dist.Work | None) -> None:
    if work is not None:
        work.wait()


class _SparseGather(Function):
    @staticmethod
    def forward(ctx, x: Tensor, ops: Sparse1dGraphOps) -> tuple[Tensor, Tensor]:
        ctx.ops = ops
        halo, work = ops.fetch_halo(x, "gather.forward")
        x_dst = ops.dst.apply(x)                               # local, while the halo moves
        x_src = ops.edge_rows(ops.src_own.apply(x), None, x)   # S_pp X_p
        _wait(work)
        x_src.index_copy_(0, ops.halo_rows.to(x.device), ops.src_halo.apply(halo))
        return x_src, x_dst

    @staticmethod
    def backward(ctx, g_src: Tensor, g_dst: Tensor) -> tuple[Tensor, None]:
        ops: Sparse1dGraphOps = ctx.ops
        returned, work = ops.return_halo(ops.src_halo.apply_transposed(g_src),
                                         "gather.backward")
        g_x = ops.dst.apply_transposed(g_dst).add_(ops.src_own.apply_transposed(g_src))
        _wait(work)
        return ops.add_returned(g_x, returned), None


class _SparseAggregate(Function):
    @staticmethod
    def forward(ctx, e: Tensor, ops: Sparse1dGraphOps) -> tuple[Tensor, Tensor]:
        ctx.ops = ops
        returned, work = ops.return_halo(ops.src_halo.apply_transposed(e), "aggregate.forward")
        m_in = ops.dst.apply_transposed(e)
        m_own = ops.src_own.apply_transposed(e)
        _wait(work)
        return m_in, ops.add_returned(m_own, returned)

    @staticmethod
    def backward(ctx, g_in: Tensor, g_out: Tensor) -> tuple[Tensor, None]:
        ops: Sparse1dGraphOps = ctx.ops
        halo, work = ops.fetch_halo(g_out, "aggregate.backward")
        g_e = ops.dst.apply(g_in)
        g_e.index_add_(0, ops.own_rows.to(g_e.device), ops.src_own.apply(g_out))
        _wait(work)
        g_e.index_add_(0, ops.halo_rows.to(g_e.device), ops.src_halo.apply(halo))
        return g_e, None


Sparse1dGraphOps._gather_fn = _SparseGather
Sparse1dGraphOps._aggregate_fn = _SparseAggregate
