"""The scored hit graph that track building works on, taken from an event graph record.

Edges arrive as ``edge_index`` [2, E] with ``scores`` [E], directed inner -> outer by the
docs/design.md contract. Track building wants every hit pair once, oriented along the particle's
path: each edge keeps its given direction (the truth graph's is the particle's own order, so a
looper that curls back inwards stays one chain); a pair given in both directions keeps the
direction of its higher score (ties: from the smaller ``r``).

A pair given twice keeps its highest score. Hits are ranked inner to outer by ``r`` (without
``pos``, by index); the walkthrough starts its walks in that order. When the record has
``volume_id`` and ``layer_id``, the layer key ``volume_id * 1000 +
layer_id`` of each hit travels along (the walkthrough uses it for overlap double hits).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from trkx.arrays import as_numpy
from trkx.data.record import EDGE_INDEX, SCORES
from trkx.data.truth import layer_key as hit_layer_key


@dataclass(frozen=True, eq=False)
class ScoredGraph:
    """Directed, deduplicated scored edges over ``num_nodes`` hits (numpy arrays)."""

    num_nodes: int
    src: np.ndarray      # [E] int64, inner hit
    dst: np.ndarray      # [E] int64, outer hit
    score: np.ndarray    # [E] float64
    rank: np.ndarray     # [N] int64: position of each hit in inner-to-outer order
    layer: np.ndarray | None = None   # [N] int64 detector layer key, when known

    def above(self, cut: float) -> ScoredGraph:
        """The edges with ``score >= cut``."""
        keep = self.score >= cut
        return ScoredGraph(self.num_nodes, self.src[keep], self.dst[keep], self.score[keep],
                           self.rank, self.layer)


def radial_rank(pos: np.ndarray | None, num_nodes: int) -> np.ndarray:
    """Inner-to-outer order of the hits: rank by transverse radius ``r``, ties by index."""
    if pos is None:
        return np.arange(num_nodes, dtype=np.int64)
    radius = np.asarray(pos, dtype=np.float64)[:, 0]
    order = np.lexsort((np.arange(num_nodes), radius))
    rank = np.empty(num_nodes, dtype=np.int64)
    rank[order] = np.arange(num_nodes)
    return rank


def scored_graph(edge_index, scores, num_nodes: int, pos=None, layer=None,
                 min_score: float | None = None) -> ScoredGraph:
    """Orient, deduplicate and validate scored edges (see the module docstring).

    ``layer`` [N] is an optional per-hit layer key (``volume_id * 1000 + layer_id``).
    ``min_score`` drops edges scoring below it first: the same graph as
    ``scored_graph(...).above(min_score)`` (a pair's kept copy is its best-scoring one, so it
    survives the cut exactly when its best copy does), without sorting the dropped edges.
    """
    edges = as_numpy(edge_index).astype(np.int64, copy=False)
    score = as_numpy(scores).astype(np.float64, copy=False).reshape(-1)
    if edges.ndim != 2 or edges.shape[0] != 2:
        raise ValueError(f"edge_index must have shape [2, E], got {list(edges.shape)}")
    if score.shape[0] != edges.shape[1]:
        raise ValueError(f"scores has {score.shape[0]} entries for {edges.shape[1]} edges")
    if edges.size and (edges.min() < 0 or edges.max() >= num_nodes):
        raise ValueError(f"edge_index refers to hit {int(edges.max())} (or a negative one) "
                         f"but the event has {num_nodes} hits")
    rank = radial_rank(None if pos is None else as_numpy(pos), num_nodes)
    a, b = edges
    not_loop = a != b
    if min_score is not None:
        not_loop &= score >= min_score
    a, b, score = a[not_loop], b[not_loop], score[not_loop]
    src, dst = a, b
    # Deduplicate unordered pairs: the highest score wins, then the inner-to-outer direction.
    key = np.minimum(src, dst) * num_nodes + np.maximum(src, dst)
    outward = rank[src] < rank[dst]
    order = np.lexsort((~outward, -score, key))
    first = np.ones(len(order), dtype=bool)
    first[1:] = key[order][1:] != key[order][:-1]
    keep = order[first]
    if layer is not None:
        layer = as_numpy(layer).astype(np.int64)
        if len(layer) != num_nodes:
            raise ValueError(f"layer has {len(layer)} entries for {num_nodes} hits")
    return ScoredGraph(num_nodes, src[keep], dst[keep], score[keep], rank, layer)


def graph_from_record(record, min_score: float | None = None) -> ScoredGraph:
    """The :class:`ScoredGraph` of a record with ``edge_index``, ``scores``, ``num_nodes``
    (edges scoring below ``min_score`` left out, see :func:`scored_graph`)."""
    for field in (EDGE_INDEX, SCORES):
        if getattr(record, field, None) is None:
            raise ValueError(f"the event record has no {field!r}: track building needs the "
                             "scored edges of an edge-classifier stage")
    volume, layer = getattr(record, "volume_id", None), getattr(record, "layer_id", None)
    layer_key = None if volume is None or layer is None else \
        hit_layer_key(as_numpy(volume), as_numpy(layer))
    return scored_graph(record.edge_index, record.scores, int(record.num_nodes),
                        getattr(record, "pos", None), layer_key, min_score)
