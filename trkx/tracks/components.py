"""Tracks as connected components of the edges that pass a score cut.

With ``A`` the N x N adjacency of the edges ``{(i, j) : s_ij >= cut}``, the tracks are the
connected components of the undirected graph ``A + A^T``; a hit with no such edge is its own
(single-hit) track. scipy's ``connected_components`` labels them in O(N + E).
"""

from __future__ import annotations

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from trkx.tracks.graph import ScoredGraph


def component_labels(num_nodes: int, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Connected-component label of every hit (int64, 0..C-1) for undirected edges."""
    adjacency = coo_matrix((np.ones(len(src), dtype=np.int8), (src, dst)),
                           shape=(num_nodes, num_nodes)).tocsr()
    _, labels = connected_components(adjacency, directed=False)
    return labels.astype(np.int64)


def connected_component_tracks(graph: ScoredGraph, cut: float) -> np.ndarray:
    """Track id of every hit: its component among the edges with ``score >= cut``."""
    kept = graph.above(cut)
    return component_labels(graph.num_nodes, kept.src, kept.dst)
