"""Plain breadth-first-search subgraph sampling, one minibatch at a time (the reference).

For target hits T of one minibatch: V_0 = T, and hop l+1 adds every hit adjacent (edges taken
in either direction) to a hit first reached at hop l; after L hops V = V_0 + ... + V_L, and the
subgraph is every original edge with both ends in V. This is what
:func:`trkx.gnn.sampling.sampler.sample_subgraphs` computes with sparse products (no fan-out
limit); the tests compare the two, and benchmarks/sampling.py times this loop as the baseline.
"""

from __future__ import annotations

import torch
from torch import Tensor


def neighbour_lists(edge_index: Tensor, num_nodes: int) -> list[list[int]]:
    """Adjacency lists of the symmetrised graph (each neighbour once)."""
    neighbours: list[set[int]] = [set() for _ in range(num_nodes)]
    for s, d in edge_index.t().tolist():
        neighbours[s].add(d)
        neighbours[d].add(s)
    return [sorted(n) for n in neighbours]


def bfs_nodes(neighbours: list[list[int]], targets: list[int], hops: int) -> list[int]:
    """Hits within ``hops`` of ``targets`` (ascending)."""
    seen = set(targets)
    frontier = list(seen)
    for _ in range(hops):
        reached = []
        for hit in frontier:
            for other in neighbours[hit]:
                if other not in seen:
                    seen.add(other)
                    reached.append(other)
        frontier = reached
    return sorted(seen)


def bfs_subgraph(neighbours: list[list[int]], edge_index: Tensor, targets: list[int],
                 hops: int) -> tuple[Tensor, Tensor, Tensor]:
    """``(node_ids, edge_ids, target_edge_mask)`` of one minibatch by BFS."""
    nodes = torch.tensor(bfs_nodes(neighbours, targets, hops), dtype=torch.long)
    inside = torch.zeros(len(neighbours), dtype=torch.bool)
    inside[nodes] = True
    edge_ids = torch.nonzero(inside[edge_index[0]] & inside[edge_index[1]]).flatten()
    is_target = torch.zeros(len(neighbours), dtype=torch.bool)
    is_target[torch.tensor(targets, dtype=torch.long)] = True
    src, dst = edge_index[:, edge_ids]
    return nodes, edge_ids, is_target[src] | is_target[dst]
