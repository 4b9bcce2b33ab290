"""Tracks as connected components of the edges that pass a score cut.

With ``A`` the N x N adjacency of the edges ``{(i, j) : s_ij >= cut}``, the tracks are the
connected components of the undirected graph ``A + A^T``; a hit with no such edge is its own
(single-hit) track. Union-find over the edges (union by the smaller root, path halving) finds
them in O((N + E) alpha(N)); components are then numbered 0..C-1 in order of their smallest hit,
the numbering of scipy's ``connected_components``. Compiled by numba (``cache=True``) when it is
importable, else the same function runs as plain Python.
"""

from __future__ import annotations

import numpy as np

from trkx.tracks.builder.graph import ScoredGraph

_KERNEL = None


def component_labels(num_nodes: int, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Connected-component label of every hit (int64, 0..C-1) for undirected edges."""
    global _KERNEL
    if _KERNEL is None:
        try:
            import numba
        except ImportError:
            _KERNEL = _union_find_labels
        else:
            _KERNEL = numba.njit(cache=True, nogil=True)(_union_find_labels)
    return _KERNEL(int(num_nodes), np.ascontiguousarray(src, dtype=np.int64),
                   np.ascontiguousarray(dst, dtype=np.int64))


def _union_find_labels(n, src, dst):
    """Component of every hit, numbered in order of each component's smallest hit."""
    parent = np.arange(n)
    for e in range(len(src)):
        a, b = src[e], dst[e]
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        while parent[b] != b:
            parent[b] = parent[parent[b]]
            b = parent[b]
        if a < b:
            parent[b] = a
        elif b < a:
            parent[a] = b
    labels = np.empty(n, np.int64)
    count = 0
    for i in range(n):
        root = parent[i]
        while parent[root] != root:
            root = parent[root]
        parent[i] = root
        if root == i:
            labels[i] = count
            count += 1
        else:
            labels[i] = labels[root]
    return labels


def connected_component_tracks(graph: ScoredGraph, cut: float) -> np.ndarray:
    """Track id of every hit: its component among the edges with ``score >= cut``."""
    kept = graph.above(cut)
    return component_labels(graph.num_nodes, kept.src, kept.dst)
