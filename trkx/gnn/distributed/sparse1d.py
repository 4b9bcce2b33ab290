"""``sparse-1d``: sparsity-aware 1D distribution, only the halo rows move.

Block ``p`` owns nodes ``V_p`` and edges ``E_p`` (destination in ``V_p``), so ``D_p X`` and
``D_p^T E`` are local. Write ``S_p = [S_pp | S_pH]`` over local nodes and the halo ``H_p``
(distinct remote sources, ordered by owner then global id). Then

    gather:     X_src = S_p [X_p ; X_H]            X_H received: ONE all_to_all_single
                X_dst = D_p X_p                     (computed while the halo is in flight)
    aggregate:  M_in  = D_p^T E_p
                [M_own ; M_H] = S_p^T E_p           M_H (partial sums for remote sources)
                M_out = M_own + sum of the M_H rows other blocks computed for V_p
                                                    returned in ONE all_to_all_single

Backward is the transposed exchange: the gradient of a gather returns halo partial sums to
their owners (``S^T G``), the gradient of an aggregate fetches the halo rows of ``dM_out``.
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
    """:class:`~trkx.gnn.graph_ops.GraphOps` of one rank for the ``sparse-1d`` algorithm."""

    def __init__(self, shard: GraphShard, plan: HaloPlan, group: dist.ProcessGroup | None,
                 stats: CommStats | None = None) -> None:
        self.shard, self.plan, self.group = shard, plan, group
        self.stats = stats if stats is not None else CommStats()
        self.src = Incidence(plan.src_extended, shard.num_nodes + plan.num_halo)
        self.dst = Incidence(shard.dst_local, shard.num_nodes)

    @classmethod
    def build(cls, edge_index: Tensor, shard: GraphShard, group: dist.ProcessGroup | None,
              stats: CommStats | None = None) -> Sparse1dGraphOps:
        return cls(shard, HaloPlan.build(edge_index, shard), group, stats)

    # the two exchanges, shared by forward and backward passes
    def fetch_halo(self, x: Tensor, op: str) -> tuple[Tensor, dist.Work | None]:
        """Start receiving the halo rows of ``x`` (owners send ``x[send_index]``)."""
        return all_to_all_rows(self.stats, op, x.index_select(0, self.plan.send_index.to(x.device)),
                               self.plan.send_splits, self.plan.recv_splits, self.shard.block,
                               self.group, async_op=True)

    def return_halo(self, halo_rows: Tensor, op: str) -> tuple[Tensor, dist.Work | None]:
        """Start sending halo partial sums back to their owners."""
        return all_to_all_rows(self.stats, op, halo_rows, self.plan.recv_splits,
                               self.plan.send_splits, self.shard.block, self.group,
                               async_op=True)

    def add_returned(self, target: Tensor, returned: Tensor) -> Tensor:
        return target.index_add(0, self.plan.send_index.to(target.device), returned)


class _SparseGather(Function):
    @staticmethod
    def forward(ctx, x: Tensor, ops: Sparse1dGraphOps) -> tuple[Tensor, Tensor]:
        ctx.ops = ops
        halo, work = ops.fetch_halo(x, "gather.forward")
        x_dst = ops.dst.apply(x)                      # local work overlaps the exchange
        work.wait()
        x_src = ops.src.apply(torch.cat([x, halo]))
        return x_src, x_dst

    @staticmethod
    def backward(ctx, g_src: Tensor, g_dst: Tensor) -> tuple[Tensor, None]:
        ops: Sparse1dGraphOps = ctx.ops
        g_ext = ops.src.apply_transposed(g_src)
        returned, work = ops.return_halo(g_ext[ops.num_nodes:], "gather.backward")
        g_x = ops.dst.apply_transposed(g_dst) + g_ext[:ops.num_nodes]
        work.wait()
        return ops.add_returned(g_x, returned), None


class _SparseAggregate(Function):
    @staticmethod
    def forward(ctx, e: Tensor, ops: Sparse1dGraphOps) -> tuple[Tensor, Tensor]:
        ctx.ops = ops
        m_ext = ops.src.apply_transposed(e)
        returned, work = ops.return_halo(m_ext[ops.num_nodes:], "aggregate.forward")
        m_in = ops.dst.apply_transposed(e)
        work.wait()
        return m_in, ops.add_returned(m_ext[:ops.num_nodes], returned)

    @staticmethod
    def backward(ctx, g_in: Tensor, g_out: Tensor) -> tuple[Tensor, None]:
        ops: Sparse1dGraphOps = ctx.ops
        halo, work = ops.fetch_halo(g_out, "aggregate.backward")
        g_e = ops.dst.apply(g_in)
        work.wait()
        return g_e + ops.src.apply(torch.cat([g_out, halo])), None


Sparse1dGraphOps._gather_fn = _SparseGather
Sparse1dGraphOps._aggregate_fn = _SparseAggregate
