"""A rank's part of the event graph: its block of nodes and the edges into them.

Given the global ``edge_index`` (``[2, E]``, ``k = (s_k -> d_k)``) and a partition ``owner``
(``[N]``), block ``p`` holds nodes ``V_p`` (global ids ascending) and edges
``E_p = {k : owner[d_k] = p}`` (global ids ascending). Local node ``a`` of block ``q`` is the
``a``-th smallest global id in ``V_q``; every rank can compute every block's numbering from
``owner`` alone, so building the communication plans needs no communication.

``D_p`` (local edges x local nodes) is then rank-local; ``S_p`` needs rows of other blocks.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass(frozen=True)
class GraphShard:
    """Block ``block`` of ``num_blocks`` of a graph with ``total_nodes``/``total_edges``."""

    block: int
    num_blocks: int
    owner: Tensor          # [N] block of every node
    local_index: Tensor    # [N] position of every node inside its own block
    block_sizes: tuple[int, ...]
    nodes: Tensor          # [n_p] global ids of this block's nodes
    edges: Tensor          # [E_p] global ids of the edges owned (destination in this block)
    src: Tensor            # [E_p] global source of every owned edge
    dst_local: Tensor      # [E_p] local index of every owned edge's destination
    total_nodes: int
    total_edges: int

    @classmethod
    def build(cls, edge_index: Tensor, owner: Tensor, block: int, num_blocks: int) -> GraphShard:
        owner = owner.to(torch.int64).cpu()
        edge_index = edge_index.to(torch.int64).cpu()
        if edge_index.dim() != 2 or edge_index.shape[0] != 2:
            raise ValueError(f"edge_index must have shape [2, E], got {tuple(edge_index.shape)}")
        num_nodes = owner.numel()
        if edge_index.numel() and int(edge_index.max()) >= num_nodes:
            raise ValueError(f"edge_index refers to node {int(edge_index.max())} but the "
                             f"partition covers {num_nodes} nodes")
        if owner.numel() and (int(owner.min()) < 0 or int(owner.max()) >= num_blocks):
            raise ValueError(f"partition owner values must lie in [0, {num_blocks})")
        sizes = torch.bincount(owner, minlength=num_blocks)
        # position inside the block: rank of the global id among the block's ids
        order = torch.argsort(owner * num_nodes + torch.arange(num_nodes), stable=True)
        starts = torch.cat([sizes.new_zeros(1), torch.cumsum(sizes, 0)[:-1]])
        local_index = torch.empty(num_nodes, dtype=torch.int64)
        local_index[order] = torch.arange(num_nodes) - starts[owner[order]]
        edges = torch.nonzero(owner[edge_index[1]] == block).flatten()
        return cls(block=block, num_blocks=num_blocks, owner=owner, local_index=local_index,
                   block_sizes=tuple(int(s) for s in sizes), nodes=order[
                       int(starts[block]):int(starts[block]) + int(sizes[block])],
                   edges=edges, src=edge_index[0, edges],
                   dst_local=local_index[edge_index[1, edges]],
                   total_nodes=num_nodes, total_edges=edge_index.shape[1])

    @property
    def num_nodes(self) -> int:
        return self.block_sizes[self.block]

    @property
    def num_edges(self) -> int:
        return self.edges.numel()

    def source_blocks(self) -> Tensor:
        """[E_p] the block owning each owned edge's source."""
        return self.owner[self.src]

    def edges_from(self, source_block: int) -> tuple[Tensor, Tensor]:
        """(local edge positions, source index inside ``source_block``) of owned edges whose
        source lies in ``source_block``: the block ``S_{p,q}`` of the source incidence."""
        rows = torch.nonzero(self.source_blocks() == source_block).flatten()
        return rows, self.local_index[self.src[rows]]


class ShardGraphOps:
    """What every distributed ``GraphOps`` shares: local sizes from its ``shard`` and the two
    fused operators dispatched to the algorithm's autograd functions (``_gather_fn``,
    ``_aggregate_fn``, set by each subclass)."""

    shard: GraphShard
    _gather_fn: type
    _aggregate_fn: type

    @property
    def num_nodes(self) -> int:
        return self.shard.num_nodes

    @property
    def num_edges(self) -> int:
        return self.shard.num_edges

    def gather(self, x):
        """``(S X, D X)`` for this rank's edges (see ``trkx.gnn.graph_ops``)."""
        return self._gather_fn.apply(x, self)

    def aggregate(self, e):
        """``(D^T E, S^T E)`` for this rank's nodes (see ``trkx.gnn.graph_ops``)."""
        return self._aggregate_fn.apply(e, self)
