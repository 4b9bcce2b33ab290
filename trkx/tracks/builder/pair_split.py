"""Close pairs: a track that holds two particles side by side is split in two.

Two particles from one vertex in nearly the same direction (a jet's, a decay's) cross the same
layers millimetres apart. The walk (trkx.tracks.builder.walkthrough) takes a layer's second and
third hits as siblings, as it must for the hits of overlapping modules that one particle
leaves, so it can follow both particles at once and make one track of both: twice the hits of
either, so it matches neither (double majority) and counts as a fake.

A candidate track ``t`` holding two or more hits on at least ``min_shared`` layers is walked
again over its own edges (score ``>= cut``) without siblings (``max_layer_hits`` 1), so that
each particle's hits come out as a chain of their own. With ``A`` and ``B`` its two largest
chains (most hits; equal counts: the lower chain id), ``t`` is split when both hold at least
``min_hits`` hits, they share at least ``min_shared`` layers, and one helix does not fit
their union (trkx.tracks.fit.helix_fit, ``chi2`` its ``chi2 / ndf``):

    chi2(A u B) > ratio * max(chi2(A), chi2(B), 1).

``A`` keeps ``t``'s id, ``B`` takes a new one after ``labels.max()``, and ``t``'s hits in
neither chain become lone hits (tracks of one hit each; the extension may give them back).

One particle whose modules overlap on many layers also walks into two chains on shared layers
(each module's hits in a chain), but one helix fits their union, so the fit is what tells a
pair: on 8 simulated pile-up-200 events (docs/levers.md) about 3,000 tracks of two long chains
sharing three layers, of which the fit splits 56. Deterministic: a function of the labels,
the graph and the positions.
"""

from __future__ import annotations

import numpy as np

from trkx.tracks.builder.graph import ScoredGraph
from trkx.tracks.builder.walkthrough import walkthrough_tracks
from trkx.tracks.fit.helix_fit import fit_helices

#: Chains of fewer hits are never split off: a particle's piece needs a helix of its own.
SPLIT_MIN_HITS = 5
#: Layers both chains (and, before that, the track's repeated hits) must share.
SPLIT_MIN_SHARED = 3


def split_pairs(labels: np.ndarray, graph: ScoredGraph, pos: np.ndarray, cut: float,
                ratio: float, sibling_ratio: float = 0.7, min_hits: int = SPLIT_MIN_HITS,
                min_shared: int = SPLIT_MIN_SHARED) -> np.ndarray:
    """Track id of every hit after the close pairs are split (module docstring); ``pos`` [N,
    3] = (r, phi, z), ``graph.layer`` the hits' layer keys (``volume_id * 1000 + layer_id``),
    ``ratio >= 1``."""
    if ratio < 1.0:
        raise ValueError(f"the split's chi2 ratio must be >= 1, got {ratio}")
    labels = np.asarray(labels, dtype=np.int64)
    if len(labels) == 0 or graph.layer is None:
        return labels
    layer = np.asarray(graph.layer, dtype=np.int64)
    span = int(layer.max()) + 1
    n_ids = int(labels.max()) + 1
    keys, counts = np.unique(labels * span + layer, return_counts=True)
    repeated = np.bincount(keys[counts >= 2] // span, minlength=n_ids)
    candidate = (repeated >= min_shared)[labels]
    if not candidate.any():
        return labels
    inside = (graph.score >= cut) & candidate[graph.src] & (labels[graph.src] == labels[graph.dst])
    own = ScoredGraph(graph.num_nodes, graph.src[inside], graph.dst[inside], graph.score[inside],
                      graph.rank, layer)
    chain = walkthrough_tracks(own, cut, 1, sibling_ratio)
    first, second = _two_largest_chains(labels, chain, candidate, min_hits)
    tracks = np.flatnonzero(first >= 0)
    if len(tracks) == 0:
        return labels
    hits = np.flatnonzero(candidate)
    hits = hits[(first[labels[hits]] >= 0)]
    in_a = chain[hits] == first[labels[hits]]
    in_b = chain[hits] == second[labels[hits]]
    shared = _shared_layers(labels[hits], layer[hits], in_a, in_b, span, n_ids)
    tracks = tracks[shared[tracks] >= min_shared]
    if len(tracks) == 0:
        return labels
    split = tracks[_union_fits_worse(labels, hits, in_a, in_b, tracks, pos, layer, ratio)]
    if len(split) == 0:
        return labels
    out = labels.copy()
    new_id = np.full(n_ids, -1, dtype=np.int64)
    new_id[split] = n_ids + np.arange(len(split))
    moved = hits[(new_id[labels[hits]] >= 0) & in_b]
    out[moved] = new_id[labels[moved]]
    loose = hits[(new_id[labels[hits]] >= 0) & ~in_a & ~in_b]
    out[loose] = n_ids + len(split) + np.arange(len(loose))
    return out


def _two_largest_chains(labels: np.ndarray, chain: np.ndarray, candidate: np.ndarray,
                        min_hits: int) -> tuple[np.ndarray, np.ndarray]:
    """Per track id: its largest and second-largest chain ids (equal counts: the lower id),
    -1 for both where the track is no candidate or its second chain has < ``min_hits``."""
    n_ids = int(labels.max()) + 1
    hits = np.flatnonzero(candidate)
    pairs, count = np.unique(np.stack([labels[hits], chain[hits]]), axis=1,
                             return_counts=True)
    order = np.lexsort((pairs[1], -count, pairs[0]))
    track, ids, count = pairs[0][order], pairs[1][order], count[order]
    start = np.flatnonzero(np.r_[True, track[1:] != track[:-1]])
    first = np.full(n_ids, -1, dtype=np.int64)
    second = np.full(n_ids, -1, dtype=np.int64)
    has_two = np.r_[start[1:], len(track)] - start >= 2
    start = start[has_two]
    long = count[start + 1] >= min_hits
    first[track[start[long]]] = ids[start[long]]
    second[track[start[long]]] = ids[start[long] + 1]
    return first, second


def _shared_layers(track: np.ndarray, layer: np.ndarray, in_a: np.ndarray, in_b: np.ndarray,
                   span: int, n_ids: int) -> np.ndarray:
    """Per track id: the layers on which both of its chains hold a hit."""
    both = np.intersect1d(track[in_a] * span + layer[in_a], track[in_b] * span + layer[in_b])
    return np.bincount(both // span, minlength=n_ids)


def _union_fits_worse(labels: np.ndarray, hits: np.ndarray, in_a: np.ndarray,
                      in_b: np.ndarray, tracks: np.ndarray, pos: np.ndarray, layer: np.ndarray,
                      ratio: float) -> np.ndarray:
    """Per track of ``tracks``: whether the helix of its two chains together fits worse than
    ``ratio`` times the worse of their own (module docstring); one batched fit of the chains
    and their unions (virtual tracks ``3 k``, ``3 k + 1``, ``3 k + 2``)."""
    row = np.full(int(labels.max()) + 1, -1, dtype=np.int64)
    row[tracks] = np.arange(len(tracks))
    k = row[labels[hits]]
    a, b = (k >= 0) & in_a, (k >= 0) & in_b
    members = np.concatenate([hits[a], hits[b], hits[a | b]])
    virtual = np.concatenate([3 * k[a], 3 * k[b] + 1, 3 * k[a | b] + 2])
    x, y = pos[members, 0] * np.cos(pos[members, 1]), pos[members, 0] * np.sin(pos[members, 1])
    fit = fit_helices(virtual, x, y, pos[members, 2], layer[members] // 1000)
    chi2 = np.full(3 * len(tracks), np.nan)
    chi2[fit.track_id] = fit.chi2_ndf
    chi2 = chi2.reshape(-1, 3)
    worse = np.maximum(np.maximum(chi2[:, 0], chi2[:, 1]), 1.0)
    return chi2[:, 2] > ratio * worse
