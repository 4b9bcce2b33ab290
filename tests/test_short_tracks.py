"""Short tracks the GNN is sure of (TrackBuilder.short_score): kept below the minimum length,
scored by the tuner from one evaluation exactly as building at each value gives."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from tests.tracks_events import broken_after_third_hit, noise_free_simulated_record
from trkx.data.record_type import Record
from trkx.tracks.builder.building import TrackBuilder
from trkx.tracks.builder.track_labels import track_mean_score, tracks_frame
from trkx.tracks.evaluate.event_truth import truth_from_record
from trkx.tracks.evaluate.metrics import MetricCuts, evaluate_event, overall_summary
from trkx.tracks.tune.length_figures import length_figures
from trkx.tracks.tune.tuning import (
    TunedCut,
    _mean_scores,
    _track_table,
    tune_cut,
)


def three_short_tracks() -> Record:
    """Two 4-hit chains, one scored 0.99 and one 0.6 (mean 0.6 + 0.1 k), and a 2-hit pair at 1."""
    edges = torch.tensor([[0, 1, 2, 4, 5, 6, 8], [1, 2, 3, 5, 6, 7, 9]])
    scores = torch.tensor([0.99, 0.99, 0.99, 0.5, 0.6, 0.7, 1.0])
    record = Record(edge_index=edges, scores=scores, hit_id=torch.arange(10))
    record.num_nodes = 10
    return record


def test_a_short_track_the_gnn_is_sure_of_stays_the_others_dissolve():
    record = three_short_tracks()
    plain = TrackBuilder(walk_cut=0.5, min_length=5).build(record)
    assert len(np.unique(plain)) == 10                     # everything below 5 hits dissolved
    sure = TrackBuilder(walk_cut=0.5, min_length=5, short_score=0.95).build(record)
    assert len(np.unique(sure[:4])) == 1                   # the 0.99 chain stays one track
    assert len(np.unique(sure[4:8])) == 4                  # mean 0.6 < 0.95: dissolved
    assert sure[8] != sure[9]                              # 2 hits: never kept by the score
    assert len(np.unique(TrackBuilder(walk_cut=0.5, min_length=5,
                                      short_score=0.55).build(record)[4:8])) == 1
    labels = np.array([0, 0, 0, 0, 1, 1, 1, 1, 2, 2])
    src, dst = record.edge_index.numpy()
    mean = track_mean_score(labels, src, dst, record.scores.numpy().astype(np.float64))
    np.testing.assert_allclose(mean, [0.99] * 4 + [0.6] * 4 + [1.0] * 2)
    with pytest.raises(ValueError, match="short_score must lie in"):
        TrackBuilder(short_score=1.5)


def scored_broken_record() -> Record:
    """Particles broken after their third hit, each edge scored in [0.5, 1) (seeded), so the
    short pieces differ in their mean score."""
    record = broken_after_third_hit(noise_free_simulated_record(seed=5, mu=4.0))
    generator = torch.Generator().manual_seed(3)
    record.scores = 0.5 + 0.5 * torch.rand(record.edge_index.shape[1], generator=generator)
    return record


def test_short_score_scan_from_one_evaluation_equals_building_at_each_value():
    record = scored_broken_record()
    builder = TrackBuilder(walk_cut=0.5, stitch=False)
    truth = truth_from_record(record)
    unshortened = builder.build(record)
    table = _track_table(evaluate_event(truth, tracks_frame(record.hit_id, unshortened, 7),
                                        MetricCuts()),
                         _mean_scores(record, unshortened, 0.5))
    figures = set()
    for sure in (None, 0.7, 0.75, 0.8):
        built = replace(builder, min_length=6, short_score=sure).build(record)
        direct = overall_summary([evaluate_event(truth, tracks_frame(record.hit_id, built, 7),
                                                 MetricCuts())])
        eff, fake = length_figures(table, int(direct["n_signal_particles"]), 6, 6, 2.0, sure)
        assert eff == pytest.approx(direct["efficiency"])
        assert fake == pytest.approx(direct["fake_rate"])
        figures.add((round(eff, 6), round(fake, 6)))
    assert len(figures) >= 3                               # the score matters here
    # at a length longer than most particles the score rescues whole tracks: more found
    tuned = tune_cut([record], builder, fake_target=1.0, cuts=(0.5,), lengths=(12,),
                     forward_lengths=(), short_scores=(None, 0.7), quality_cuts=(None,),
                     short_quality_cuts=(None,))
    assert tuned.short_score == 0.7 and tuned.efficiency > tuned.scan[0][2]
    # at length 6 keeping the broken 3-hit pieces only adds fakes: no score is chosen
    tuned = tune_cut([record], builder, fake_target=0.0, cuts=(0.5,), lengths=(6,),
                     forward_lengths=(), short_scores=(None, 0.7), quality_cuts=(None,),
                     short_quality_cuts=(None,))
    assert tuned.short_score is None and tuned.fake_rate == 0.0


def test_the_tuned_cut_carries_its_short_score_to_the_builder():
    chosen = TunedCut(0.6, 7, 0.91, 0.047, (), 8, 0.9).apply(TrackBuilder())
    assert (chosen.walk_cut, chosen.min_length, chosen.min_length_forward,
            chosen.short_score) == (0.6, 7, 8, 0.9)
    assert TunedCut(0.6, 7, 0.91, 0.047, (), 8).apply(TrackBuilder()).short_score is None
