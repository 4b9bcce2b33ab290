"""Per-hit truth, the truth graph (with overlap double hits), signal cuts, edge labels, weights."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from trkx.data.detector import load_detector
from trkx.data.io import load_event
from trkx.data.particle_id import decode_particle_id, encode_particle_id, is_secondary
from trkx.data.record import build_event_record, load_record, save_record
from trkx.data.truth import SignalCuts, edge_truth, truth_graph
from trkx.data.weights import ORDER_WEIGHTS, hit_weights, pt_weight


def edges_as_set(edges: np.ndarray) -> set[tuple[int, int]]:
    return set(zip(edges[0].tolist(), edges[1].tolist()))


def test_truth_graph_chains_layers_and_fans_out_double_hits() -> None:
    # particle 5: hits 0 (layer 2), 1 and 2 (both layer 4: an overlap double hit), 3 (layer 6)
    # particle 7: hits 4, 5 on layers 2, 4; hit 6 is noise
    particle = np.array([5, 5, 5, 5, 7, 7, 0])
    distance = np.array([10.0, 20.0, 21.0, 30.0, 10.0, 20.0, 15.0])
    volume = np.full(7, 8)
    layer = np.array([2, 4, 4, 6, 2, 4, 4])
    edges = truth_graph(particle, distance, volume, layer)
    assert edges_as_set(edges) == {(0, 1), (0, 2), (1, 3), (2, 3), (4, 5)}
    # order of the input rows does not matter
    perm = np.array([6, 3, 1, 5, 0, 2, 4])
    edges_p = truth_graph(particle[perm], distance[perm], volume[perm], layer[perm])
    assert edges_as_set(perm[edges_p]) == edges_as_set(edges)


def test_single_layer_particle_is_chained() -> None:
    # particle 3: three overlap hits on one endcap disk and nothing else
    edges = truth_graph(np.array([3, 3, 3, 4]), np.array([2.0, 1.0, 3.0, 1.0]),
                        np.full(4, 9), np.full(4, 2))
    assert edges_as_set(edges) == {(1, 0), (0, 2)}


def test_truth_graph_without_particles_is_empty() -> None:
    assert truth_graph(np.zeros(3, int), np.zeros(3), np.ones(3), np.ones(3)).shape == (2, 0)


def test_signal_cuts() -> None:
    cuts = SignalCuts(pt_min=1.0, min_hits=3, max_eta=2.0)
    mask = cuts.select(pt=np.array([0.5, 1.0, 2.0, 2.0, 2.0]), n_hits=np.array([5, 3, 2, 5, 5]),
                       eta=np.array([0, 0, 0, 2.5, 1.0]), particle_id=np.array([1, 2, 3, 4, 0]))
    assert mask.tolist() == [False, True, False, False, False]


def test_edge_truth_labels() -> None:
    particle = np.array([1, 1, 1, 2, 2, 0])
    track_edges = np.array([[0, 1, 3], [1, 2, 4]])
    signal_hit = np.array([True, True, True, False, False, False])
    candidates = np.array([[0, 2, 0, 3, 0, 5], [1, 1, 2, 4, 3, 4]])
    y, y_pid, signal = edge_truth(candidates, particle, track_edges, signal_hit, 6)
    assert y.tolist() == [True, True, False, True, False, False]
    assert y_pid.tolist() == [True, True, True, True, False, False]
    assert signal.tolist() == [True, True, False, False, False, False]


def test_record_of_the_real_event_round_trips(tmp_path: Path, sample_prefix: Path) -> None:
    hits, cells, particles, truth = load_event(sample_prefix)
    record = build_event_record(hits, cells, particles, truth, detector=load_detector())
    assert record.x.shape == (5527, 11) and record.x.dtype.is_floating_point
    assert record.track_edges.shape[0] == 2
    # every truth edge joins two hits of one particle, outward from the vertex
    src, dst = record.track_edges
    assert (record.particle_id[src] == record.particle_id[dst]).all()
    assert (record.particle_id[src] != 0).all()
    no_cells = build_event_record(hits, None, particles, truth)
    assert no_cells.x.shape == (5527, 3)
    path = save_record(record, tmp_path / "event000000001.pt")
    again = load_record(path)
    assert again.num_nodes == record.num_nodes
    assert again.feature_names == record.feature_names
    for key in ("x", "track_edges", "particle_id", "weight", "signal_hit"):
        assert (getattr(again, key) == getattr(record, key)).all()


def test_corrupt_record_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "bad.pt"
    path.write_bytes(b"not a torch file")
    with pytest.raises(ValueError, match=r"bad.pt: not an event record \(a text file: "):
        load_record(path)


def test_weights_reproduce_the_released_challenge_weights(sample_prefix: Path) -> None:
    (particles, truth) = load_event(sample_prefix, ["particles", "truth"])
    released = truth["weight"].to_numpy(np.float64)
    ours = hit_weights(truth, particles)
    assert ours.sum() == pytest.approx(1.0)
    # the sample is a subsample of whole particles: same weights up to the normalisation
    assert np.allclose(ours * released.sum(), released, rtol=0, atol=1e-5 * released.max())
    assert (ours[truth["particle_id"].to_numpy() == 0] == 0).all()


def test_weight_ingredients() -> None:
    assert pt_weight(np.array([0.01, 0.3, 0.5, 1.75, 3.0, 10.0])) == pytest.approx(
        [0.0, 0.2, 0.2, 0.6, 1.0, 1.0])
    assert ORDER_WEIGHTS[4, :4].sum() == pytest.approx(1.0)
    assert ORDER_WEIGHTS[3].sum() == 0.0           # fewer than 4 hits: no weight
    assert ORDER_WEIGHTS[20, 0] > ORDER_WEIGHTS[20, 10] < ORDER_WEIGHTS[20, 19]


def test_particle_id_fields_round_trip() -> None:
    ids = encode_particle_id(vertex_id=np.array([1, 193]), primary_id=np.array([5, 637]),
                             generation=np.array([0, 2]), secondary_id=np.array([0, 5]),
                             process=np.array([0, 2]))
    fields = decode_particle_id(ids)
    assert fields["vertex_id"].tolist() == [1, 193]
    assert fields["generation"].tolist() == [0, 2]
    assert is_secondary(ids).tolist() == [False, True]
    with pytest.raises(ValueError, match="generation"):
        encode_particle_id(1, 1, generation=4096)


def test_real_secondaries_have_zero_weight(sample_prefix: Path) -> None:
    (particles, truth) = load_event(sample_prefix, ["particles", "truth"])
    secondary = is_secondary(truth["particle_id"].to_numpy())
    assert secondary.any() and (truth["weight"].to_numpy()[secondary] == 0).all()
    frame = pd.DataFrame(decode_particle_id(particles["particle_id"].to_numpy()))
    assert (frame["vertex_id"] > 0).all()
