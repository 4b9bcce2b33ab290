"""trkx.tracks.builder.pair_split: a track the walk made of two particles side by side is split
into the two, and one particle whose modules overlap on every layer stays one track."""

from __future__ import annotations

import numpy as np
import pytest

from trkx.tracks.builder.building import TrackBuilder
from trkx.tracks.builder.graph import scored_graph
from trkx.tracks.builder.pair_split import split_pairs

RADII = np.array([32.0, 72.0, 116.0, 172.0, 260.0, 360.0, 500.0, 660.0])
LAYER_IDS = np.arange(2, 2 * len(RADII) + 1, 2)
PIXEL_BARREL = 8


def helix_hits(pt: float, charge: int, phi0: float, cot: float,
               radii: np.ndarray = RADII) -> np.ndarray:
    """``(r, phi, z)`` of a prompt particle's crossings of the barrel radii (2 T field)."""
    radius = pt / (0.3 * 2.0) * 1000.0
    turn = np.arcsin(radii / (2.0 * radius))
    return np.stack([radii, phi0 - charge * turn, cot * 2.0 * radius * turn], axis=1)


def chain_edges(first: np.ndarray, second: np.ndarray, score: float) -> list[tuple]:
    """Edges from each hit of ``first`` on layer k to the hit of ``second`` on layer k + 1."""
    return [(int(first[k]), int(second[k + 1]), score) for k in range(len(first) - 1)]


def graph_of(pos: np.ndarray, layer_index: np.ndarray, edges: list[tuple]):
    src, dst, score = (np.array(column) for column in zip(*edges))
    layer = PIXEL_BARREL * 1000 + LAYER_IDS[layer_index]
    return scored_graph(np.stack([src, dst]), score, len(pos), pos, layer)


def close_pair():
    """Two particles 2 mrad apart, each one hit per layer; the GNN scores the edges between
    them almost as high as their own, so the walk takes the other's hit as a sibling."""
    a = helix_hits(2.0, 1, 0.300, 0.4)
    b = helix_hits(1.6, 1, 0.302, 0.4)
    pos = np.concatenate([a, b])
    ia, ib = np.arange(len(a)), len(a) + np.arange(len(b))
    edges = (chain_edges(ia, ia, 0.97) + chain_edges(ib, ib, 0.96)
             + chain_edges(ia, ib, 0.93) + chain_edges(ib, ia, 0.92))
    particle = np.r_[np.zeros(len(a), int), np.ones(len(b), int)]
    return graph_of(pos, np.r_[np.arange(len(a)), np.arange(len(b))], edges), pos, particle


def overlapping_particle():
    """One particle whose modules overlap on every layer: a second hit 1.5 mm further out on
    its own helix, each hit joined to both hits of the next layer."""
    inner = helix_hits(2.0, -1, 1.1, -0.7)
    outer = helix_hits(2.0, -1, 1.1, -0.7, RADII + 1.5)
    pos = np.concatenate([inner, outer])
    ii, io = np.arange(len(inner)), len(inner) + np.arange(len(outer))
    edges = (chain_edges(ii, ii, 0.97) + chain_edges(io, io, 0.96)
             + chain_edges(ii, io, 0.95) + chain_edges(io, ii, 0.94))
    return graph_of(pos, np.r_[np.arange(len(inner)), np.arange(len(outer))], edges), pos


def builder(split: float | None) -> TrackBuilder:
    return TrackBuilder(walk_cut=0.5, stitch=False, split_chi2_ratio=split)


def test_the_walk_merges_a_close_pair_and_the_split_gives_each_particle_its_track() -> None:
    graph, pos, particle = close_pair()
    merged = builder(None).candidates(graph, pos)
    assert len(np.unique(merged)) == 1                   # the walk's siblings took both
    labels = builder(3.0).candidates(graph, pos)
    assert len(np.unique(labels)) == 2
    for p in (0, 1):
        assert len(np.unique(labels[particle == p])) == 1
    assert labels[particle == 0][0] != labels[particle == 1][0]
    assert np.array_equal(labels, split_pairs(merged, graph, pos, 0.5, 3.0))


def test_one_particle_on_overlapping_modules_stays_one_track() -> None:
    graph, pos = overlapping_particle()
    labels = builder(3.0).candidates(graph, pos)
    assert len(np.unique(labels)) == 1


def test_the_ratio_decides_and_needs_chains_of_five_hits() -> None:
    graph, pos, _ = close_pair()
    merged = np.zeros(len(pos), dtype=np.int64)
    assert len(np.unique(split_pairs(merged, graph, pos, 0.5, 1e12))) == 1
    inner = np.arange(len(pos)) % len(RADII) < 4              # each particle's first 4 hits
    keep = inner[graph.src] & inner[graph.dst]
    short = scored_graph(np.stack([graph.src[keep], graph.dst[keep]]), graph.score[keep],
                         len(pos), pos, graph.layer)
    labels = np.where(inner, 0, 1 + np.arange(len(pos)))     # one track of the 8 inner hits
    assert len(np.unique(split_pairs(labels, short, pos, 0.5, 3.0)[inner])) == 1


def test_a_ratio_below_one_is_refused() -> None:
    graph, pos, _ = close_pair()
    with pytest.raises(ValueError, match="chi2 ratio"):
        split_pairs(np.zeros(len(pos), dtype=np.int64), graph, pos, 0.5, 0.5)
    with pytest.raises(ValueError, match="split_chi2_ratio"):
        TrackBuilder(split_chi2_ratio=0.9)
