"""Walkthrough track building: follow the best edge outwards, resolving branchings.

Keep the edges with ``s_ij >= cut`` (directed inner -> outer, see :mod:`trkx.tracks.graph`) and
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
track, is not taken., which stops when no hit of ``H_k`` has an outgoing edge to a free
hit. The walk's hits form one track and
are no longer free. At a branching the walk thus takes the highest-scoring continuation and
leaves the other branch to a later walk, so two tracks that cross (share a spurious edge) come
out as two tracks, where plain connected components would merge them.

A double hit at the start of a track, or any double hit when layers are unknown, is left
behind as a single-hit walk. Such left-over hits ``i`` join the track of their best kept neighbour,

    track(i) = track(argmax_{j : (i, j) or (j, i) kept, |track(j)| >= 2} s_ij),

(one pass, neighbours on multi-hit walks only). Every hit ends on exactly one track; a hit
with no kept edge at all is a single-hit track.
"""

from __future__ import annotations

import numpy as np

from trkx.tracks.components import component_labels
from trkx.tracks.graph import ScoredGraph


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

    # Out-edges of hits in complex components, grouped by source, best score first.
    edge_in_complex = in_complex[kept.src]
    src, dst, score = kept.src[edge_in_complex], kept.dst[edge_in_complex], \
        kept.score[edge_in_complex]
    order = np.lexsort((-score, src))
    targets = dst[order].tolist()
    target_scores = score[order].tolist()
    offsets = np.concatenate([[0], np.cumsum(np.bincount(src, minlength=n))]).tolist()

    layer_list = graph.layer.tolist() if graph.layer is not None else None
    best_in = np.zeros(n)
    np.maximum.at(best_in, dst, score)
    best_in_list = best_in.tolist()
    next_id = int(labels.max()) + 1
    free = in_complex.tolist()          # plain lists: the walk is a scalar loop
    track = labels.tolist()
    starts = np.flatnonzero(in_complex)
    # Hits without an incoming edge (track starts) first, each group from the inside out.
    starts = starts[np.lexsort((graph.rank[starts], in_degree[starts] > 0))].tolist()
    for start in starts:
        if not free[start]:
            continue
        group = [start]
        while group:
            for node in group:
                free[node] = False
                track[node] = next_id
            group = _next_group(group, targets, target_scores, offsets, free, layer_list,
                                best_in_list, max_layer_hits, sibling_ratio)
        next_id += 1
    track = np.asarray(track, dtype=np.int64)
    return _attach_leftovers(track, src, dst, score)


def _next_group(group: list[int], targets: list[int], target_scores: list[float],
                offsets: list[int], free: list[bool], layer: list[int] | None,
                best_in: list[float], max_layer_hits: int, sibling_ratio: float) -> list[int]:
    """The walk's next hits: the best free successor of the group, plus up to
    ``max_layer_hits - 1`` other free successors on the same layer (best first; overlapping
    modules) whose best incoming edge comes from the group, when layers are known."""
    best, best_score = -1, -1.0
    for node in group:
        for k in range(offsets[node], offsets[node + 1]):
            if free[targets[k]]:
                if target_scores[k] > best_score:
                    best, best_score = targets[k], target_scores[k]
                break                      # out-edges are sorted best first
    if best < 0:
        return []
    if layer is None or max_layer_hits < 2:
        return [best]
    siblings: dict[int, float] = {}
    for node in group:
        for k in range(offsets[node], offsets[node + 1]):
            j = targets[k]
            if (j != best and free[j] and layer[j] == layer[best]
                    and target_scores[k] >= sibling_ratio * best_in[j]):
                siblings[j] = max(siblings.get(j, -1.0), target_scores[k])
    ranked = sorted(siblings, key=lambda j: -siblings[j])[: max_layer_hits - 1]
    return [best, *ranked]


def _attach_leftovers(track: np.ndarray, src: np.ndarray, dst: np.ndarray,
                      score: np.ndarray) -> np.ndarray:
    """Move single-hit walks onto the multi-hit track of their best-scoring neighbour."""
    size = np.bincount(track)[track]
    a = np.concatenate([src, dst])          # the left-over end
    b = np.concatenate([dst, src])          # its neighbour
    s = np.concatenate([score, score])
    usable = (size[a] == 1) & (size[b] >= 2)
    a, b, s = a[usable], b[usable], s[usable]
    if len(a) == 0:
        return track
    order = np.lexsort((-s, a))
    first = np.ones(len(order), dtype=bool)
    first[1:] = a[order][1:] != a[order][:-1]
    chosen = order[first]
    track = track.copy()
    track[a[chosen]] = track[b[chosen]]
    return track
