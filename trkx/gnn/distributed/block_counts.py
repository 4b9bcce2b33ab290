"""What a partition gives each block: the edges it owns and the halo it must receive.

For a partition ``owner`` (``[N]`` int64, values in ``[0, B)``) of a graph with edges
``s_k -> d_k``, every edge lives with its destination's owner:

    E_p = {k : owner[d_k] = p}                    (the edges block p owns: its work)
    H_p = {s_k : k in E_p, owner[s_k] != p}       (distinct remote sources: its halo)
    edge imbalance = max_p |E_p| / mean_p |E_p|   (1.0: perfect balance)

The partitioners (:mod:`.partition`, :mod:`.graph_partition`) balance ``|E_p|`` and shrink
``sum_p |H_p|``; :mod:`.figures` reports both.
"""

from __future__ import annotations

import numpy as np
from torch import Tensor


def halo_sizes(edge_index: Tensor, owner: Tensor, num_parts: int) -> np.ndarray:
    """``|H_p|`` for every block: distinct remote source nodes of the edges the block owns."""
    src, dst = edge_index[0].numpy(), edge_index[1].numpy()
    own = owner.numpy()
    part = own[dst]
    remote = own[src] != part
    keys = np.unique(part[remote].astype(np.int64) * own.size + src[remote])
    return np.bincount(keys // own.size, minlength=num_parts)


def edges_per_block(edge_index: Tensor, owner: Tensor, num_parts: int) -> np.ndarray:
    """``|E_p|`` for every block: the edges whose destination it owns."""
    return np.bincount(owner.numpy()[edge_index[1].numpy()], minlength=num_parts)


def edge_imbalance(edge_index: Tensor, owner: Tensor, num_parts: int) -> float:
    """``max_p |E_p| / mean_p |E_p|`` (1.0 is perfect balance)."""
    edges = edges_per_block(edge_index, owner, num_parts)
    return float(edges.max() / max(edges.mean(), 1e-300))
