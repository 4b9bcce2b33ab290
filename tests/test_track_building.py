"""Track building: connected components, walkthrough, every hit on exactly one track."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from tests.tracks_events import noise_free_simulated_record
from trkx.data.record_type import Record
from trkx.tracks.builder.building import TrackBuilder
from trkx.tracks.builder.graph import scored_graph
from trkx.tracks.builder.track_labels import compact_labels, tracks_frame
from trkx.tracks.evaluate.event_truth import truth_from_record
from trkx.tracks.evaluate.metrics import MetricCuts, evaluate_event, event_summary


@pytest.fixture(scope="module")
def simulated_record():
    return noise_free_simulated_record()


def crossing_record() -> Record:
    """Two 5-hit tracks on layers 1..5 (hits 0-4 and 5-9) with two spurious crossing edges.

    True edges score 0.9; the crossing edges a1 -> b2 (0.6) and b2 -> a3 (0.55) pass a 0.5 cut,
    so connected components merge the two tracks.
    """
    radius = np.array([30.0, 70, 110, 170, 260] * 2)
    phi = np.array([0.0] * 5 + [0.02] * 5)
    z = np.array([10.0, 23, 36, 56, 86, 10, 23, 36, 56, 86])
    true_edges = [(i, i + 1) for i in range(4)] + [(i, i + 1) for i in range(5, 9)]
    cross_edges = [(1, 7), (7, 3)]
    edges = np.array(true_edges + cross_edges).T
    scores = np.array([0.9] * 8 + [0.6, 0.55], dtype=np.float32)
    record = Record(edge_index=torch.from_numpy(edges), scores=torch.from_numpy(scores),
                  pos=torch.tensor(np.stack([radius, phi, z], 1), dtype=torch.float32),
                  hit_id=torch.arange(1, 11), volume_id=torch.full((10,), 8),
                  layer_id=torch.tensor([2, 4, 6, 8, 10] * 2))
    record.num_nodes = 10
    return record


def test_walkthrough_resolves_a_crossing_that_components_merge():
    record = crossing_record()
    merged = TrackBuilder("components", cc_cut=0.5).build(record)
    assert len(np.unique(merged)) == 1
    walked = TrackBuilder("walkthrough", walk_cut=0.5).build(record)
    assert len(np.unique(walked[:5])) == 1 and len(np.unique(walked[5:])) == 1
    assert walked[0] != walked[5]


def test_walkthrough_takes_overlap_double_hits_but_not_crossing_hits():
    # Track 0 -> {1, 2} -> 3 where 1 and 2 sit on one layer (overlapping modules).
    edges = torch.tensor([[0, 0, 1, 2], [1, 2, 3, 3]])
    record = Record(edge_index=edges, scores=torch.tensor([0.9, 0.8, 0.9, 0.8]),
                  pos=torch.tensor([[30.0, 0, 0], [70, 0, 0], [71, 0, 0], [110, 0, 0]]),
                  hit_id=torch.arange(4), volume_id=torch.full((4,), 8),
                  layer_id=torch.tensor([2, 4, 4, 6]))
    record.num_nodes = 4
    labels = TrackBuilder(walk_cut=0.5).build(record)
    assert len(np.unique(labels)) == 1
    # Without layers a step takes one hit; the left-over hit still joins its neighbours' track.
    record.volume_id = None
    record.layer_id = None
    assert len(np.unique(TrackBuilder(walk_cut=0.5).build(record))) == 1


def test_every_hit_gets_one_track_and_cut_edges_split(simulated_record):
    record = simulated_record.clone()
    n = record.num_nodes
    rng = np.random.default_rng(0)
    record.scores = torch.from_numpy(rng.random(record.edge_index.shape[1]).astype(np.float32))
    for builder in (TrackBuilder("components"), TrackBuilder()):
        labels = builder.build(record)
        assert labels.shape == (n,) and labels.dtype == np.int64
        assert labels.min() == 0 and np.array_equal(np.unique(labels),
                                                    np.arange(labels.max() + 1))
    # No edge passes the cut: every hit is its own track.
    record.scores = torch.zeros_like(record.scores)
    for builder in (TrackBuilder("components"), TrackBuilder()):
        assert len(np.unique(builder.build(record))) == n


@pytest.mark.parametrize("method", ["components", "walkthrough"])
def test_perfect_scores_on_noise_free_simulated_event(simulated_record, method):
    truth = truth_from_record(simulated_record)
    assert (truth.particle_id != 0).all()
    labels = TrackBuilder(method).build(simulated_record)
    submission = tracks_frame(simulated_record.hit_id, labels, 7)
    summary = event_summary(evaluate_event(truth, submission, MetricCuts()))
    assert summary["n_signal_particles"] > 5
    assert summary["efficiency"] == 1.0
    assert summary["fake_rate"] == 0.0
    assert summary["duplicate_rate"] == 0.0
    if method == "components":
        assert summary["trackml_score"] == pytest.approx(1.0, abs=1e-12)
    else:  # a walk may leave a hit of a low-pT looper behind
        assert summary["trackml_score"] > 0.995


def test_scored_graph_orients_and_deduplicates():
    pos = np.array([[10.0, 0, 0], [20.0, 0, 0], [30.0, 0, 0]])
    edges = np.array([[1, 0, 2, 1], [0, 1, 1, 2]])
    scores = np.array([0.3, 0.7, 0.2, 0.9])
    given = scored_graph(edges, scores, 3, pos)
    pairs = {(int(a), int(b)): float(s) for a, b, s in zip(given.src, given.dst, given.score)}
    assert pairs == {(0, 1): 0.7, (1, 2): 0.9}
    with pytest.raises(ValueError, match="refers to hit 5"):
        scored_graph(np.array([[0], [5]]), np.array([1.0]), 3)
    with pytest.raises(ValueError, match="scores has 2 entries for 1 edges"):
        scored_graph(np.array([[0], [1]]), np.array([1.0, 1.0]), 3)


def test_early_cut_equals_cut_after_deduplication(simulated_record):
    rng = np.random.default_rng(3)
    edges = simulated_record.edge_index.numpy()
    both = np.concatenate([edges, edges[::-1]], axis=1)          # every pair twice
    scores = rng.random(both.shape[1])
    pos = simulated_record.pos.numpy()
    n = int(simulated_record.num_nodes)
    for cut in (0.2, 0.5, 0.8):
        late = scored_graph(both, scores, n, pos).above(cut)
        early = scored_graph(both, scores, n, pos, min_score=cut)
        assert 0 < len(early.src) < len(scores) // 2
        for name in ("src", "dst", "score"):
            np.testing.assert_array_equal(getattr(early, name), getattr(late, name))
    record = simulated_record.clone()
    record.edge_index, record.scores = torch.from_numpy(both), torch.from_numpy(scores)
    builder = TrackBuilder(walk_cut=0.5, min_length=3)
    from trkx.tracks.builder.graph import graph_from_record

    np.testing.assert_array_equal(builder.build(record),
                                  builder.build_graph(graph_from_record(record), record.pos))


def test_builder_rejects_bad_settings_and_records():
    with pytest.raises(ValueError, match="method"):
        TrackBuilder("kalman")
    with pytest.raises(ValueError, match="walk_cut"):
        TrackBuilder(walk_cut=1.5)
    record = Record(hit_id=torch.arange(3))
    record.num_nodes = 3
    with pytest.raises(ValueError, match="no 'edge_index'"):
        TrackBuilder().build(record)


def test_compact_labels_and_tracks_frame():
    assert compact_labels(np.array([7, 7, 3, 9, 3])).tolist() == [0, 0, 1, 2, 1]
    frame = tracks_frame(torch.tensor([11, 12]), np.array([0, 1]), 5)
    assert list(frame.columns) == ["event_id", "hit_id", "track_id"]
    pd.testing.assert_frame_equal(frame, pd.DataFrame({"event_id": [5, 5], "hit_id": [11, 12],
                                                       "track_id": [0, 1]}))


def _reference_walkthrough(graph, cut, max_layer_hits, sibling_ratio):
    """The walkthrough as a plain Python scalar loop over lists (the implementation before it
    was compiled), kept here as the reference the compiled walk must reproduce label for label."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    kept = graph.above(cut)
    n = graph.num_nodes
    adjacency = coo_matrix((np.ones(len(kept.src)), (kept.src, kept.dst)), shape=(n, n))
    labels = connected_components(adjacency.tocsr(), directed=False)[1].astype(np.int64)
    in_degree = np.bincount(kept.dst, minlength=n)
    branching = (np.bincount(kept.src, minlength=n) > 1) | (in_degree > 1)
    complex_component = np.zeros(labels.max() + 1, dtype=bool)
    complex_component[labels[branching]] = True
    in_complex = complex_component[labels]
    if not in_complex.any():
        return labels
    use = in_complex[kept.src]
    src, dst, score = kept.src[use], kept.dst[use], kept.score[use]
    order = np.lexsort((-score, src))
    targets, target_scores = dst[order].tolist(), score[order].tolist()
    offsets = np.concatenate([[0], np.cumsum(np.bincount(src, minlength=n))]).tolist()
    layer = graph.layer.tolist() if graph.layer is not None else None
    best_in = np.zeros(n)
    np.maximum.at(best_in, dst, score)
    free, track, next_id = in_complex.tolist(), labels.tolist(), int(labels.max()) + 1
    starts = np.flatnonzero(in_complex)
    for start in starts[np.lexsort((graph.rank[starts], in_degree[starts] > 0))].tolist():
        if not free[start]:
            continue
        group = [start]
        while group:
            for node in group:
                free[node], track[node] = False, next_id
            best, best_score = -1, -1.0
            for node in group:
                for k in range(offsets[node], offsets[node + 1]):
                    if free[targets[k]]:
                        if target_scores[k] > best_score:
                            best, best_score = targets[k], target_scores[k]
                        break
            if best < 0:
                group = []
            elif layer is None or max_layer_hits < 2:
                group = [best]
            else:
                siblings: dict[int, float] = {}
                for node in group:
                    for k in range(offsets[node], offsets[node + 1]):
                        j = targets[k]
                        if (j != best and free[j] and layer[j] == layer[best]
                                and target_scores[k] >= sibling_ratio * best_in[j]):
                            siblings[j] = max(siblings.get(j, -1.0), target_scores[k])
                ranked = sorted(siblings, key=lambda j: -siblings[j])[: max_layer_hits - 1]
                group = [best, *ranked]
        next_id += 1
    track = np.asarray(track, dtype=np.int64)
    size = np.bincount(track)[track]
    a, b = np.concatenate([src, dst]), np.concatenate([dst, src])
    s = np.concatenate([score, score])
    usable = (size[a] == 1) & (size[b] >= 2)
    a, b, s = a[usable], b[usable], s[usable]
    order = np.lexsort((-s, a))
    first = np.ones(len(order), dtype=bool)
    first[1:] = a[order][1:] != a[order][:-1]
    track = track.copy()
    track[a[order[first]]] = track[b[order[first]]]
    return track


def _random_layered_graph(seed: int, n: int = 400, with_layers: bool = True):
    """Hits on 8 layers with edges to the next one or two layers, scores on a coarse grid
    (many exact ties), several successors per hit (branchings) and double hits per layer."""
    rng = np.random.default_rng(seed)
    layer = np.sort(rng.integers(0, 8, n))
    radius = 30.0 * (layer + 1) + rng.random(n)
    edges = []
    for i in range(n):
        later = np.flatnonzero((layer > layer[i]) & (layer <= layer[i] + 2))
        if len(later):
            edges += [(i, int(j)) for j in rng.choice(later, min(len(later), 3), replace=False)]
    edges = np.array(edges).T
    scores = rng.integers(0, 9, edges.shape[1]) / 8.0
    pos = np.stack([radius, np.zeros(n), np.zeros(n)], 1)
    return scored_graph(edges, scores, n, pos, layer if with_layers else None)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_compiled_walk_matches_the_python_reference(seed):
    from trkx.tracks.builder.walkthrough import walkthrough_tracks

    for with_layers in (True, False):
        graph = _random_layered_graph(seed, with_layers=with_layers)
        for cut, max_layer_hits, ratio in [(0.3, 3, 0.7), (0.0, 2, 0.0), (0.5, 1, 0.7),
                                           (0.2, 4, 1.0), (0.6, 3, 0.5)]:
            expected = _reference_walkthrough(graph, cut, max_layer_hits, ratio)
            got = walkthrough_tracks(graph, cut, max_layer_hits, ratio)
            np.testing.assert_array_equal(got, expected)
            assert len(np.unique(got)) < graph.num_nodes   # the walk did join hits


def test_uncompiled_walk_matches_the_python_reference(monkeypatch):
    """Without numba the kernels run as plain Python: the same labels."""
    from trkx.tracks.builder import components, walkthrough

    monkeypatch.setattr(components, "_KERNEL", components._union_find_labels)
    monkeypatch.setattr(walkthrough, "_KERNELS", (walkthrough._sorted_out_edges,
                                                  walkthrough._walk,
                                                  walkthrough._attach_leftovers))
    graph = _random_layered_graph(5, n=150)
    for cut, max_layer_hits, ratio in [(0.3, 3, 0.7), (0.0, 2, 0.0)]:
        np.testing.assert_array_equal(walkthrough.walkthrough_tracks(graph, cut, max_layer_hits,
                                                                     ratio),
                                      _reference_walkthrough(graph, cut, max_layer_hits, ratio))


@pytest.mark.parametrize("compiled", [True, False])
def test_component_labels_number_components_as_scipy_does(compiled, monkeypatch):
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    from trkx.tracks.builder import components

    if not compiled:
        monkeypatch.setattr(components, "_KERNEL", components._union_find_labels)
    rng = np.random.default_rng(4)
    n = 3000
    for num_edges in (0, 500, 2500, 6000):
        src, dst = rng.integers(0, n, num_edges), rng.integers(0, n, num_edges)
        adjacency = coo_matrix((np.ones(num_edges), (src, dst)), shape=(n, n)).tocsr()
        count, expected = connected_components(adjacency, directed=False)
        got = components.component_labels(n, src, dst)
        assert got.dtype == np.int64 and got.max() + 1 == count
        np.testing.assert_array_equal(got, expected)
