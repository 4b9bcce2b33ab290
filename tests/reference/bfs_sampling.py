"""Plain breadth-first-search subgraph sampling, one minibatch at a time (the reference).

For target hits T of one minibatch: V_0 = T, and hop l+1 adds every hit adjacent (edges taken
in either direction) to a hit first reached at hop l; after L hops V = V_0 + ... + V_L, and the
subgraph is every original edge with both ends in V. This is what
:func:`trkx.gnn.sampling.sampler.sample_subgraphs` computes with sparse products (no fan-out
limit); the tests compare the two, and benchmarks/sampling.py times this loop as the baseline.

With a fan-out ``f_l`` each hit of the hop-l frontier draws at most ``f_l`` of its neighbours
(uniformly, without replacement) and the new ones join hop l+1; with ``max_nodes`` each hop then
keeps at most ``max_nodes - |V_l|`` of its new hits, drawn uniformly: the bulk sampler's rules
with Python's ``random`` instead of its generator (same distribution, other draws).
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import torch
from torch import Tensor


def neighbour_lists(edge_index: Tensor, num_nodes: int) -> list[list[int]]:
    """Adjacency lists of the symmetrised graph (each neighbour once)."""
    neighbours: list[set[int]] = [set() for _ in range(num_nodes)]
    for s, d in edge_index.t().tolist():
        neighbours[s].add(d)
        neighbours[d].add(s)
    return [sorted(n) for n in neighbours]


def bfs_nodes(neighbours: list[list[int]], targets: list[int], hops: int,
              fanout: Sequence[int] | None = None, max_nodes: int | None = None,
              rng: random.Random | None = None) -> list[int]:
    """Hits within ``hops`` of ``targets`` (ascending), with the optional fan-out and cap of
    the module docstring (``rng`` draws them)."""
    rng = rng or random.Random(0)
    seen = set(targets)
    frontier = list(seen)
    for hop in range(hops):
        limit = fanout[hop] if fanout else 0
        reached = []
        for hit in frontier:
            options = neighbours[hit]
            if 0 < limit < len(options):
                options = rng.sample(options, limit)
            for other in options:
                if other not in seen:
                    seen.add(other)
                    reached.append(other)
        if max_nodes is not None:
            room = max(0, max_nodes - (len(seen) - len(reached)))
            if len(reached) > room:
                kept = rng.sample(reached, room)
                seen.difference_update(set(reached) - set(kept))
                reached = kept
        frontier = reached
    return sorted(seen)


def bfs_subgraph(neighbours: list[list[int]], edge_index: Tensor, targets: list[int],
                 hops: int, fanout: Sequence[int] | None = None, max_nodes: int | None = None,
                 rng: random.Random | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """``(node_ids, edge_ids, target_edge_mask)`` of one minibatch by BFS."""
    nodes = torch.tensor(bfs_nodes(neighbours, targets, hops, fanout, max_nodes, rng),
                         dtype=torch.long)
    inside = torch.zeros(len(neighbours), dtype=torch.bool)
    inside[nodes] = True
    edge_ids = torch.nonzero(inside[edge_index[0]] & inside[edge_index[1]]).flatten()
    is_target = torch.zeros(len(neighbours), dtype=torch.bool)
    is_target[torch.tensor(targets, dtype=torch.long)] = True
    src, dst = edge_index[:, edge_ids]
    return nodes, edge_ids, is_target[src] | is_target[dst]
