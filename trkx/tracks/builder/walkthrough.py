"""Walkthrough track building: follow the best edge outwards, resolving branchings.

Keep the edges with ``s_ij >= cut`` (directed inner -> outer, see :mod:`trkx.tracks.builder.graph`)
and
split them into connected components. A component in which every hit has at most one incoming
and one outgoing edge is a simple chain and becomes one track as it is. In every other component
hits are visited in the order: first those without an incoming kept edge, then the rest, each
set from the innermost outwards (by ``r``); each hit not yet on a track starts a walk

    H_0 = {start},   h_{k+1} = argmax_{j free, (i -> j) kept, i in H_k} s_ij,
    H_{k+1} = {h_{k+1}} + {the best other free successors of H_k on the layer of h_{k+1}},

(the second term, at most ``max_layer_hits - 1`` hits, only when hit layers are known: hits of
overlapping modules of one layer all belong to the track). A sibling ``j`` must also be
reached from ``H_k`` by an edge scoring at least ``sibling_ratio`` times ``j``'s best incoming
edge, so the hit where another track crosses the layer, reached far better from its own
track, is not taken. The walk stops when no hit of ``H_k`` has an outgoing edge to a free
hit; its hits form one track and are no longer free. At a branching the walk thus takes the
highest-scoring continuation and leaves the other branch to a later walk, so two tracks that
cross (share a spurious edge) come out as two tracks, where plain connected components would
merge them.

Ties, so the labels are a function of the graph alone: the argmax takes, for each hit of
``H_k`` in order, its best free successor (out-edges ordered by score, equal scores in edge
order), and keeps the first strictly best one; a sibling's score is its best edge from
``H_k``, siblings are ranked by it, equal ones in the order they were first met.

A double hit at the start of a track, or any double hit when layers are unknown, is left
behind as a single-hit walk. Such left-over hits ``i`` join the track of their best kept neighbour,

    track(i) = track(argmax_{j : (i, j) or (j, i) kept, |track(j)| >= 2} s_ij),

(one pass, neighbours on multi-hit walks only; equal scores: out-edges before in-edges, each in
edge order). Every hit ends on exactly one track; a hit with no kept edge at all is a
single-hit track.

The walk is a scalar loop over hits, compiled by numba (``cache=True``: the first use compiles
for a few seconds, later processes load it from disk); without numba the same functions run
as plain Python, identical labels, about a hundred times slower.
"""

from __future__ import annotations

import numpy as np

from trkx.tracks.builder.components import component_labels
from trkx.tracks.builder.graph import ScoredGraph

_KERNELS = None


def walkthrough_tracks(graph: ScoredGraph, cut: float, max_layer_hits: int = 3,
                       sibling_ratio: float = 0.7) -> np.ndarray:
    """Track id of every hit (int64) from the walkthrough over edges with ``score >= cut``.

    When ``graph.layer`` is known a step takes up to ``max_layer_hits`` hits of one layer
    (overlapping modules): the best successor and the best other successors on its layer
    whose edge from the walk scores >= ``sibling_ratio`` x their best incoming edge.
    """
    kept = graph.above(cut)
    n = graph.num_nodes
    labels = component_labels(n, kept.src, kept.dst)
    out_degree = np.bincount(kept.src, minlength=n)
    in_degree = np.bincount(kept.dst, minlength=n)
    branching = (out_degree > 1) | (in_degree > 1)
    complex_component = np.zeros(labels.max() + 1 if n else 0, dtype=bool)
    complex_component[labels[branching]] = True
    in_complex = complex_component[labels]
    if not in_complex.any():
        return labels

    edge_in_complex = in_complex[kept.src]
    src = np.ascontiguousarray(kept.src[edge_in_complex], dtype=np.int64)
    dst = np.ascontiguousarray(kept.dst[edge_in_complex], dtype=np.int64)
    score = np.ascontiguousarray(kept.score[edge_in_complex], dtype=np.float64)
    starts = np.flatnonzero(in_complex)
    # Hits without an incoming edge (track starts) first, each group from the inside out.
    starts = starts[np.lexsort((graph.rank[starts], in_degree[starts] > 0))]
    use_layers = graph.layer is not None and max_layer_hits >= 2
    layer = np.ascontiguousarray(graph.layer, dtype=np.int64) if use_layers else \
        np.zeros(1, dtype=np.int64)
    sorted_out_edges, walk, attach_leftovers = _kernels()
    offsets, targets, target_scores, best_in = sorted_out_edges(src, dst, score, n)
    track = labels.copy()
    walk(starts, offsets, targets, target_scores, best_in, in_complex.copy(), track, layer,
         use_layers, int(max_layer_hits), float(sibling_ratio), int(labels.max()) + 1)
    return attach_leftovers(track, src, dst, score)


def _kernels():
    """The three kernels, compiled by numba (or loaded from its cache) when it is importable,
    else the plain Python functions below; numba is imported only here."""
    global _KERNELS
    if _KERNELS is None:
        try:
            import numba
        except ImportError:
            _KERNELS = (_sorted_out_edges, _walk, _attach_leftovers)
        else:
            jit = numba.njit(cache=True, nogil=True)
            _KERNELS = (jit(_sorted_out_edges), jit(_walk), jit(_attach_leftovers))
    return _KERNELS


def _sorted_out_edges(src, dst, score, n):
    """Out-edges grouped by source (CSR ``offsets`` [N + 1]), each group best score first,
    equal scores in edge order (a counting sort, then a stable insertion sort per hit); and
    every hit's best incoming score (0 without one)."""
    offsets = np.zeros(n + 1, np.int64)
    best_in = np.zeros(n, np.float64)
    for e in range(len(src)):
        offsets[src[e] + 1] += 1
        if score[e] > best_in[dst[e]]:
            best_in[dst[e]] = score[e]
    for i in range(n):
        offsets[i + 1] += offsets[i]
    fill = offsets[:-1].copy()
    targets = np.empty(len(src), np.int64)
    target_scores = np.empty(len(src), np.float64)
    for e in range(len(src)):
        k = fill[src[e]]
        targets[k] = dst[e]
        target_scores[k] = score[e]
        fill[src[e]] = k + 1
    for i in range(n):
        for k in range(offsets[i] + 1, offsets[i + 1]):
            t, s = targets[k], target_scores[k]
            m = k
            while m > offsets[i] and target_scores[m - 1] < s:
                targets[m] = targets[m - 1]
                target_scores[m] = target_scores[m - 1]
                m -= 1
            targets[m] = t
            target_scores[m] = s
    return offsets, targets, target_scores, best_in


def _walk(starts, offsets, targets, target_scores, best_in, free, track, layer, use_layers,
          max_layer_hits, sibling_ratio, next_id):
    """Walk from every free hit of ``starts`` in order (module docstring), writing a new track
    id into ``track`` for each walk and clearing ``free`` of the hits it takes."""
    n = len(free)
    width = max(max_layer_hits, 1)
    group = np.empty(width, np.int64)
    following = np.empty(width, np.int64)
    max_out = 0
    for i in range(n):
        max_out = max(max_out, offsets[i + 1] - offsets[i])
    cand_node = np.empty(width * max_out + 1, np.int64)
    cand_score = np.empty(width * max_out + 1, np.float64)
    cand_used = np.zeros(width * max_out + 1, np.bool_)
    slot = np.full(n, -1, np.int64)          # a hit's place among the candidates, -1: none
    for s in range(len(starts)):
        start = starts[s]
        if not free[start]:
            continue
        group[0] = start
        size = 1
        while size > 0:
            for g in range(size):
                free[group[g]] = False
                track[group[g]] = next_id
            best, best_score = -1, -1.0
            for g in range(size):
                node = group[g]
                for k in range(offsets[node], offsets[node + 1]):
                    if free[targets[k]]:
                        if target_scores[k] > best_score:
                            best, best_score = targets[k], target_scores[k]
                        break                    # out-edges are sorted best first
            if best < 0:
                break
            following[0] = best
            following_size = 1
            if use_layers:
                count = 0
                for g in range(size):
                    node = group[g]
                    for k in range(offsets[node], offsets[node + 1]):
                        j = targets[k]
                        if (j != best and free[j] and layer[j] == layer[best]
                                and target_scores[k] >= sibling_ratio * best_in[j]):
                            c = slot[j]
                            if c < 0:
                                slot[j] = count
                                cand_node[count] = j
                                cand_score[count] = target_scores[k]
                                count += 1
                            elif target_scores[k] > cand_score[c]:
                                cand_score[c] = target_scores[k]
                for _ in range(min(max_layer_hits - 1, count)):
                    pick = -1
                    for c in range(count):       # best first, equal ones as first met
                        if not cand_used[c] and (pick < 0 or cand_score[c] > cand_score[pick]):
                            pick = c
                    cand_used[pick] = True
                    following[following_size] = cand_node[pick]
                    following_size += 1
                for c in range(count):
                    slot[cand_node[c]] = -1
                    cand_used[c] = False
            group, following = following, group
            size = following_size
        next_id += 1


def _attach_leftovers(track, src, dst, score):
    """Move single-hit walks onto the multi-hit track of their best-scoring neighbour (ties:
    the first of the out-edges, then of the in-edges, in edge order)."""
    size = np.zeros(track.max() + 1, np.int64)
    for i in range(len(track)):
        size[track[i]] += 1
    best = np.full(len(track), -1, np.int64)
    best_score = np.zeros(len(track), np.float64)
    for side in range(2):
        for e in range(len(src)):
            a, b = (src[e], dst[e]) if side == 0 else (dst[e], src[e])
            if size[track[a]] == 1 and size[track[b]] >= 2 and (
                    best[a] < 0 or score[e] > best_score[a]):
                best[a] = b
                best_score[a] = score[e]
    out = track.copy()
    for i in range(len(track)):
        if best[i] >= 0:
            out[i] = track[best[i]]
    return out
