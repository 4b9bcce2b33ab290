"""Per-region minimum track length, its tuning from one evaluation, and the findable share."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from tests.tracks_events import broken_after_third_hit, noise_free_simulated_record
from trkx.data.record_type import Record
from trkx.tracks.builder.building import TrackBuilder
from trkx.tracks.builder.track_labels import dissolve_short, tracks_frame
from trkx.tracks.evaluate.event_truth import truth_from_record
from trkx.tracks.evaluate.findable import findable_particles, findable_share
from trkx.tracks.evaluate.metrics import MetricCuts, evaluate_event, overall_summary
from trkx.tracks.tune.length_figures import length_figures
from trkx.tracks.tune.tuning import (
    TunedCut,
    _track_table,
    tune_cut,
)


def two_track_record() -> Record:
    """A 7-hit central track (z = 0) and a 4-hit forward track (|eta| ~ 2.6), chained."""
    r = np.array([30.0, 70, 110, 170, 260, 360, 500, 30, 70, 110, 170])
    z = np.r_[np.zeros(7), 200.0 * r[7:] / 30.0]
    pos = torch.tensor(np.stack([r, np.zeros(11), z], 1), dtype=torch.float32)
    edges = torch.tensor([[0, 1, 2, 3, 4, 5, 7, 8, 9], [1, 2, 3, 4, 5, 6, 8, 9, 10]])
    record = Record(edge_index=edges, scores=torch.ones(9), pos=pos, hit_id=torch.arange(11))
    record.num_nodes = 11
    return record


def test_forward_length_keeps_a_short_forward_track_that_one_length_dissolves():
    record = two_track_record()
    one = TrackBuilder(walk_cut=0.5, min_length=5).build(record)
    assert len(np.unique(one[7:])) == 4          # the 4-hit forward track is dissolved
    assert len(np.unique(one[:7])) == 1
    regions = TrackBuilder(walk_cut=0.5, min_length=5, min_length_forward=3,
                           forward_eta=2.0).build(record)
    assert len(np.unique(regions[7:])) == 1 and len(np.unique(regions[:7])) == 1
    assert regions[0] != regions[7]
    # and the other way round: a long forward length dissolves it, a short central one keeps it
    strict = TrackBuilder(walk_cut=0.5, min_length=3, min_length_forward=5).build(record)
    assert len(np.unique(strict[7:])) == 4 and len(np.unique(strict[:7])) == 1
    # without positions every track is central
    labels = np.array([0] * 7 + [1] * 4)
    assert (dissolve_short(labels, 5, 3, 2.0, None)[7:] != 1).all()


def test_length_scan_from_one_evaluation_equals_building_at_each_length():
    """Break every long particle after its third hit: the figures the tuner scores from the
    unshortened tracks must equal those of building and evaluating at each length pair."""
    record = broken_after_third_hit(noise_free_simulated_record(seed=5, mu=4.0))
    builder = TrackBuilder(forward_eta=1.0, stitch=False)
    tuned = tune_cut([record], builder, fake_target=1.0, cuts=(0.5,), lengths=(3, 4, 6),
                     forward_lengths=(3, 5))
    truth = truth_from_record(record)
    unshortened = replace(builder, walk_cut=0.5).build(record)
    table = _track_table(evaluate_event(truth, tracks_frame(record.hit_id, unshortened, 7),
                                        MetricCuts()))
    assert (table["abs_eta"] >= 1.0).any() and (table["abs_eta"] < 1.0).any()
    figures = set()
    for central in (3, 4, 6):
        for forward in (3, 5):
            built = replace(builder, walk_cut=0.5, min_length=central,
                            min_length_forward=forward).build(record)
            direct = overall_summary([evaluate_event(truth, tracks_frame(record.hit_id, built,
                                                                         7), MetricCuts())])
            eff, fake = length_figures(table, int(direct["n_signal_particles"]), central,
                                       forward, 1.0)
            assert eff == pytest.approx(direct["efficiency"])
            assert fake == pytest.approx(direct["fake_rate"])
            figures.add((round(eff, 6), round(fake, 6)))
    assert len(figures) >= 4          # the lengths matter here
    # fake target 1.0: every point meets it, the best efficiency wins, shortest lengths on ties
    assert (tuned.min_length, tuned.min_length_forward) == (3, 3)


def test_the_tuned_cut_carries_the_forward_length_to_the_builder():
    chosen = TunedCut(0.8, 6, 0.9, 0.04, (), 7).apply(TrackBuilder())
    assert (chosen.min_length, chosen.min_length_forward) == (6, 7)
    one = TunedCut(0.8, 6, 0.9, 0.04, ()).apply(TrackBuilder(min_length_forward=9))
    assert (one.min_length, one.min_length_forward) == (6, None)   # 6 everywhere
    with pytest.raises(ValueError, match="min_length_forward must be >= 1"):
        TrackBuilder(min_length_forward=0)



def split_record(cut_after: int, n: int = 10) -> Record:
    """One 10-hit signal particle chained on 10 layers, its chain cut after hit ``cut_after``;
    a skip edge (y = 0, same particle) jumps over the cut."""
    chain = [(i, i + 1) for i in range(n - 1) if i != cut_after]
    edges = torch.tensor(chain + [(cut_after, cut_after + 2)]).T
    y = torch.tensor([1] * len(chain) + [0])
    record = Record(edge_index=edges, y=y, y_pid=torch.ones(len(chain) + 1, dtype=torch.long),
                  particle_id=torch.full((n,), 5), pt=torch.full((n,), 2.0),
                  eta=torch.zeros(n), nhits=torch.full((n,), n), volume_id=torch.full((n,), 8),
                  layer_id=2 * torch.arange(1, n + 1))
    record.num_nodes = n
    return record


def test_findable_needs_one_true_piece_above_half_the_hits():
    _, split_in_half = findable_particles(split_record(4))       # 5 + 5 hits
    _, six_of_ten = findable_particles(split_record(5))           # 6 + 4 hits
    assert not split_in_half[0] and six_of_ten[0]
    # the skip edge joins the halves only when same-particle edges count
    _, bridged = findable_particles(split_record(4), same_particle=True)
    assert bridged[0]
    assert findable_share([split_record(4), split_record(5)]) == (0.5, 1, 2)
    # a 2-hit particle is not signal (min_hits 3); pT below the cut neither
    low = split_record(5)
    low.pt = torch.full((10,), 0.5)
    assert len(findable_particles(low)[0]) == 0


def test_truth_scores_reach_the_findable_share_at_length_three():
    record = noise_free_simulated_record(seed=5, mu=4.0)
    record.y = torch.ones(record.edge_index.shape[1], dtype=torch.long)
    share, _, _ = findable_share([record])
    labels = TrackBuilder(walk_cut=0.5, min_length=3).build(record)
    result = overall_summary([evaluate_event(truth_from_record(record),
                                             tracks_frame(record.hit_id, labels, 7))])
    assert result["efficiency"] == pytest.approx(share)


def broken_helix_record() -> Record:
    """A 10-hit helix (R = 1.67 m, z = 0.5 r) whose edge 4 -> 5 is missing, and a 5-hit track
    on the outer layers close in (eta, phi) but steeper (z = 0.6 r): only its own outer half
    continues the helix."""
    r = np.array([30.0, 70, 110, 170, 260, 360, 500, 660, 820, 1020])
    phi = np.arcsin(r / 3333.0)
    r_all = np.r_[r, r[5:]]
    phi_all = np.r_[phi, phi[5:] + 0.01]
    z_all = np.r_[0.5 * r, 0.6 * r[5:]]
    pos = torch.tensor(np.stack([r_all, phi_all, z_all], 1), dtype=torch.float64)
    chain = [(i, i + 1) for i in range(9) if i != 4] + [(i, i + 1) for i in range(10, 14)]
    record = Record(edge_index=torch.tensor(chain).T, scores=torch.ones(len(chain)), pos=pos,
                  hit_id=torch.arange(15))
    record.num_nodes = 15
    return record


def test_stitching_joins_a_track_split_by_one_missing_edge():
    record = broken_helix_record()
    plain = TrackBuilder(walk_cut=0.5, stitch=False).build(record)
    assert plain[4] != plain[5] and len(np.unique(plain[:5])) == 1
    stitched = TrackBuilder(walk_cut=0.5).build(record)
    assert len(np.unique(stitched[:10])) == 1               # one track across the gap
    assert len(np.unique(stitched[10:])) == 1 and stitched[10] != stitched[0]
    # the steeper track alone would not be taken either: remove the helix's outer half
    record.pos[5:10, 2] += 400.0                           # outer half now far off in z
    apart = TrackBuilder(walk_cut=0.5).build(record)
    assert apart[4] != apart[5] and apart[4] != apart[10]
    # without positions there is nothing to stitch with
    del record.pos
    labels = TrackBuilder(walk_cut=0.5).build(record)
    assert labels[4] != labels[5]



def test_stitching_compares_the_pieces_directions_not_their_hits_eta_from_the_origin():
    """A steep helix from a vertex 250 mm along the beam (z = -250 + 2 r), split between
    r = 170 and 260 mm: the hits' asinh(z / r) seen from the origin jump by 0.4 across the
    gap (more than the window), the pieces' own direction does not."""
    r = np.array([30.0, 70, 110, 170, 260, 360, 500, 660, 820, 1020])
    z = -250.0 + 2.0 * r
    assert abs(np.arcsinh(z[3] / r[3]) - np.arcsinh(z[4] / r[4])) > 0.3
    pos = torch.tensor(np.stack([r, np.arcsin(r / 3333.0), z], 1), dtype=torch.float64)
    chain = [(i, i + 1) for i in range(9) if i != 3]
    record = Record(edge_index=torch.tensor(chain).T, scores=torch.ones(len(chain)), pos=pos,
                  hit_id=torch.arange(10))
    record.num_nodes = 10
    assert len(np.unique(TrackBuilder(walk_cut=0.5).build(record))) == 1
    assert len(np.unique(TrackBuilder(walk_cut=0.5, stitch=False).build(record))) == 2


def test_stitching_reads_a_pieces_direction_from_two_layers_not_from_an_overlap_double():
    """A forward helix (eta ~ 2.9) split where a disk's hit is missing; the outer piece starts
    with two hits on one disk (overlapping modules, 4 mm apart along the beam), one of them
    50 um off the helix as a measured hit is: over that 4 mm the curvature through the two is
    far off, so only the hits on two layers join the pieces."""
    from trkx.tracks.builder.graph import radial_rank
    from trkx.tracks.builder.stitching import stitch_pieces

    cot, radius = 9.0, 2000.0
    z = np.array([600.0, 700.0, 820.0, 1100.0, 1104.0, 1300.0, 1500.0])
    r = 2 * radius * np.sin(z / cot / (2 * radius))
    phi = 0.4 - np.arcsin(r / (2 * radius))
    phi[4] += 0.05 / r[4]                                   # 50 um across the track
    pos = np.stack([r, phi, z], 1)
    layer = 9000 + np.array([2, 4, 6, 10, 10, 12, 14])
    labels = np.array([0, 0, 0, 1, 1, 1, 1])
    rank = radial_rank(pos, len(pos))
    assert len(np.unique(stitch_pieces(labels, pos, rank, layer=layer))) == 1
    assert len(np.unique(stitch_pieces(labels, pos, rank))) == 2
