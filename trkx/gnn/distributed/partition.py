"""Node partitioners: which block owns each hit. Every edge lives with its destination's owner.

A partition is an ``owner`` vector (``[N]`` int64, values in ``[0, B)``). For block ``p`` let
``V_p = {v : owner[v] = p}``, ``E_p = {k : owner[d_k] = p}`` (the edges it owns) and the *halo*
``H_p = {s_k : k in E_p, owner[s_k] != p}`` (distinct remote sources it must receive). The
sparsity-aware algorithm moves ``sum_p |H_p|`` rows per exchange; the work of a block is
estimated as ``W_p = |E_p| + |V_p| + |H_p|`` (edge network rows, node network rows, halo rows
gathered and received).

- ``contiguous``: node ``v`` goes to block ``floor(v B / N)`` (input order, no geometry);
- ``sector``: ``n_eta x n_phi = B`` detector sectors, eta bands then phi sectors cut at node
  quantiles (equal node counts); the factorisation of ``B`` with the smallest total halo wins
  when the edges are given (tracks are local in both eta and phi, so both cuts cost halo);
- ``balanced``: the sector ordering (eta band, then phi) cut into ``B`` contiguous pieces of
  equal estimated work ``W_p``, refined by re-weighting until the largest block is within a few
  percent of the mean (equal *work*, not equal node counts).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor


def halo_sizes(edge_index: Tensor, owner: Tensor, num_parts: int) -> np.ndarray:
    """``|H_p|`` for every block: distinct remote source nodes of the edges the block owns."""
    src, dst = edge_index[0].numpy(), edge_index[1].numpy()
    own = owner.numpy()
    part = own[dst]
    remote = own[src] != part
    keys = np.unique(part[remote].astype(np.int64) * own.size + src[remote])
    return np.bincount(keys // own.size, minlength=num_parts)


def block_work(edge_index: Tensor, owner: Tensor, num_parts: int) -> np.ndarray:
    """Estimated work ``W_p = |E_p| + |V_p| + |H_p|`` of every block."""
    own = owner.numpy()
    edges = np.bincount(own[edge_index[1].numpy()], minlength=num_parts)
    nodes = np.bincount(own, minlength=num_parts)
    return edges + nodes + halo_sizes(edge_index, owner, num_parts)


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


def balanced(pos: Tensor, edge_index: Tensor, num_parts: int, iterations: int = 8,
             tolerance: float = 0.02) -> Tensor:
    """Contiguous pieces of the sector ordering with equal estimated work ``W_p``."""
    num_nodes = pos.shape[0]
    _check_parts(num_nodes, num_parts)
    order = _sector_order(pos, sector(pos, num_parts, edge_index), num_parts)
    in_degree = np.bincount(edge_index[1].numpy(), minlength=num_nodes).astype(np.float64)
    weight = in_degree + 1.0
    best, best_imbalance = None, None
    for _ in range(iterations):
        owner = _cut_by_weight(order, weight, num_parts)
        work = block_work(edge_index, owner, num_parts).astype(np.float64)
        imbalance = work.max() / work.mean()
        if best_imbalance is None or imbalance < best_imbalance:
            best, best_imbalance = owner, imbalance
        if imbalance <= 1.0 + tolerance:
            break
        # halo is not a per-node quantity: scale each block's nodes by how far it is off target
        weight = weight * (work / work.mean())[owner.numpy()]
    return best


def _sector_grid(pos: Tensor, n_eta: int, n_phi: int) -> Tensor:
    eta = pseudorapidity(pos).numpy()
    phi = pos[:, 1].double().numpy()
    band = _quantile_bins(eta, n_eta)
    owner = np.empty(eta.size, dtype=np.int64)
    for b in range(n_eta):
        members = np.flatnonzero(band == b)
        owner[members] = b * n_phi + _quantile_bins(phi[members], n_phi)
    return torch.from_numpy(owner)


def _sector_order(pos: Tensor, owner: Tensor, num_parts: int) -> np.ndarray:
    """Nodes ordered by sector, then by phi inside it (neighbouring sectors stay adjacent)."""
    phi = pos[:, 1].double().numpy()
    return np.lexsort((phi, owner.numpy()))


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
    """The owner vector of partitioner ``name`` (``contiguous``, ``sector``, ``balanced``)."""
    if name == "contiguous":
        return contiguous(num_nodes, num_parts)
    if pos is None:
        raise ValueError(f"partitioner {name!r} needs node positions pos = (r, phi, z)")
    if name == "sector":
        return sector(pos, num_parts, edge_index)
    if name == "balanced":
        return balanced(pos, edge_index, num_parts)
    raise ValueError(f"unknown partitioner {name!r}; choose contiguous, sector or balanced")
