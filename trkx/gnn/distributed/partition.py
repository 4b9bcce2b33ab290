"""Node partitioners: which block owns each hit. Every edge lives with its destination's owner.

A partition is an ``owner`` vector (``[N]`` int64, values in ``[0, B)``). For block ``p`` let
``V_p = {v : owner[v] = p}``, ``E_p`` the edges it owns and ``H_p`` its halo (the distinct
remote sources it must receive; both counted by :mod:`.block_counts`). The sparsity-aware
algorithm moves ``sum_p |H_p|`` rows per exchange. The edge networks dominate a step
(``E ~ 5-10 N`` rows through the widest MLPs), so a block's work is its owned edge count
``|E_p| = sum_{v in V_p} d_in(v)`` and the figure to balance is ``max_p |E_p| / mean_p |E_p|``.

- ``contiguous``: node ``v`` goes to block ``floor(v B / N)`` (input order, no geometry);
- ``sector``: ``n_eta x n_phi = B`` detector sectors, eta bands then phi sectors cut at node
  quantiles (equal node counts); the factorisation of ``B`` with the smallest total halo wins
  when the edges are given (tracks are local in both eta and phi, so both cuts cost halo);
- ``balanced`` (the default): the nodes ordered by connected component, then by sector (eta
  band, then phi), cut into ``B`` contiguous pieces of equal owned edges: node ``v`` weighs
  ``d_in(v) + 1/1000`` and piece ``p`` takes the nodes whose weight midpoint lies in
  ``[p, p + 1) W / B``, so ``|E_p|`` differs from ``E / B`` by at most one node's in-degree.
  Components first: a graph of several events side by side (disconnected) is cut only where a
  piece boundary falls inside an event (at most ``B - 1`` cuts in all), not every event at every
  sector boundary; inside one component the sector order keeps the cuts short;
- ``refined`` and ``metis`` (:mod:`.graph_partition`): the graph itself decides the cut.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from .block_counts import halo_sizes


def contiguous(num_nodes: int, num_parts: int) -> Tensor:
    """Blocks of consecutive node indices, sizes differing by at most one."""
    _check_parts(num_nodes, num_parts)
    return torch.arange(num_nodes, dtype=torch.int64) * num_parts // num_nodes


def pseudorapidity(pos: Tensor) -> Tensor:
    """``eta = asinh(z / r)`` seen from the origin, from ``pos = (r, phi, z)``."""
    r, z = pos[:, 0].double(), pos[:, 2].double()
    return torch.asinh(z / r.clamp_min(1e-9))


def sector(pos: Tensor, num_parts: int, edge_index: Tensor | None = None) -> Tensor:
    """(eta, phi) detector sectors with equal node counts; see the module docstring."""
    _check_parts(pos.shape[0], num_parts)
    grids = [(n_eta, num_parts // n_eta) for n_eta in range(1, num_parts + 1)
             if num_parts % n_eta == 0]
    if edge_index is None:
        return _sector_grid(pos, *grids[0])
    best, best_halo = None, None
    for grid in grids:
        owner = _sector_grid(pos, *grid)
        halo = int(halo_sizes(edge_index, owner, num_parts).sum())
        if best_halo is None or halo < best_halo:
            best, best_halo = owner, halo
    return best


NODE_WEIGHT = 1e-3   # a node without in-edges still has a place in the ordering


def balanced(pos: Tensor, edge_index: Tensor, num_parts: int) -> Tensor:
    """Contiguous pieces of the sector ordering with equal owned edges (module docstring)."""
    num_nodes = pos.shape[0]
    _check_parts(num_nodes, num_parts)
    owner = sector(pos, num_parts, edge_index).numpy()
    phi = pos[:, 1].double().numpy()
    order = np.lexsort((phi, owner, components(edge_index, num_nodes)))
    weight = np.bincount(edge_index[1].numpy(), minlength=num_nodes) + NODE_WEIGHT
    return _cut_by_weight(order, weight, num_parts)


def components(edge_index: Tensor, num_nodes: int) -> np.ndarray:
    """[N] connected-component label of every node (edges taken in either direction)."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components
    src, dst = edge_index.numpy()
    graph = coo_matrix((np.ones(src.size, dtype=np.int8), (src, dst)),
                       shape=(num_nodes, num_nodes))
    return connected_components(graph, directed=True, connection="weak")[1]


def _sector_grid(pos: Tensor, n_eta: int, n_phi: int) -> Tensor:
    eta = pseudorapidity(pos).numpy()
    phi = pos[:, 1].double().numpy()
    band = _quantile_bins(eta, n_eta)
    owner = np.empty(eta.size, dtype=np.int64)
    for b in range(n_eta):
        members = np.flatnonzero(band == b)
        owner[members] = b * n_phi + _quantile_bins(phi[members], n_phi)
    return torch.from_numpy(owner)


def _quantile_bins(values: np.ndarray, bins: int) -> np.ndarray:
    """Bin index in ``[0, bins)`` with (near) equal counts, ties broken by position."""
    rank = np.empty(values.size, dtype=np.int64)
    rank[np.argsort(values, kind="stable")] = np.arange(values.size)
    return rank * bins // max(values.size, 1)


def _cut_by_weight(order: np.ndarray, weight: np.ndarray, num_parts: int) -> Tensor:
    cumulative = np.cumsum(weight[order])
    position = (cumulative - 0.5 * weight[order]) / cumulative[-1]
    piece = np.minimum((position * num_parts).astype(np.int64), num_parts - 1)
    owner = np.empty(order.size, dtype=np.int64)
    owner[order] = piece
    return torch.from_numpy(owner)


def _check_parts(num_nodes: int, num_parts: int) -> None:
    if num_parts < 1:
        raise ValueError(f"number of blocks must be >= 1, got {num_parts}")
    if num_nodes < num_parts:
        raise ValueError(f"cannot split {num_nodes} nodes into {num_parts} blocks")


def make_partition(name: str, num_parts: int, edge_index: Tensor, pos: Tensor | None,
                   num_nodes: int) -> Tensor:
    """The owner vector of partitioner ``name`` (one of ``trkx.gnn.distributed.PARTITIONERS``)."""
    if name == "contiguous":
        return contiguous(num_nodes, num_parts)
    if name not in ("sector", "balanced", "refined", "metis"):
        raise ValueError(f"unknown partitioner {name!r}; choose contiguous, sector, balanced, "
                         "refined or metis")
    if name == "metis":
        from .graph_partition import metis
        return metis(edge_index, num_nodes, num_parts)
    if pos is None:
        raise ValueError(f"partitioner {name!r} needs node positions pos = (r, phi, z)")
    if name == "sector":
        return sector(pos, num_parts, edge_index)
    owner = balanced(pos, edge_index, num_parts)
    if name == "refined":
        from .graph_partition import refine
        owner = refine(edge_index, owner, num_parts)
    return owner
