"""The second pass over the hits the first pass left alone (trkx.tracks.builder.second_pass)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
import torch

from tests.test_short_track_model import _pieces_record
from tests.tracks_events import noise_free_simulated_record
from trkx.arrays import as_numpy
from trkx.tracks.builder.building import TrackBuilder
from trkx.tracks.builder.graph import graph_from_record
from trkx.tracks.builder.second_pass import (
    LabelledCandidates,
    choose_second,
    second_candidates,
    with_second_pass,
)
from trkx.tracks.builder.track_labels import tracks_frame
from trkx.tracks.evaluate.event_truth import truth_from_record
from trkx.tracks.evaluate.metrics import MetricCuts, evaluate_event, event_summary
from trkx.tracks.fit.quality import SHORT_FEATURES, QualityModel
from trkx.tracks.tune.second_tuning import tune_second_pass


def _half_sure_record(seed: int = 3, mu: float = 6.0):
    """The truth graph of a noise-free event: the edges of every other particle scored 0.95,
    the rest's 0.6 (below a first pass at 0.9)."""
    record = noise_free_simulated_record(seed=seed, mu=mu)
    pid = record.particle_id[record.edge_index[0]]
    order = torch.unique(pid, return_inverse=True)[1]
    record.scores = torch.where(order % 2 == 0, 0.95, 0.6).to(torch.float32)
    return record


def _with_fake_edges(record, share: float = 0.3, score: float = 0.75, seed: int = 0):
    """``record`` with random edges between hits (``share`` of its edges) scored ``score``:
    a first pass below it builds junk, so the tuner walks above it."""
    generator = torch.Generator().manual_seed(seed)
    n, e = int(record.num_nodes), record.edge_index.shape[1]
    fake = torch.randint(0, n, (2, int(share * e)), generator=generator)
    record.edge_index = torch.cat([record.edge_index, fake], dim=1)
    record.scores = torch.cat([record.scores, torch.full((fake.shape[1],), score)])
    return record


def _always(bias: float) -> QualityModel:
    """A second-pass model that scores every candidate sigmoid(bias)."""
    n = len(SHORT_FEATURES)
    return QualityModel((0.0,) * n, (1.0,) * n, (0.0,) * n, bias, SHORT_FEATURES)


def _first_pass() -> TrackBuilder:
    return TrackBuilder(walk_cut=0.9, stitch=False)


def _grouping(labels: np.ndarray, hits: np.ndarray) -> set[tuple[int, ...]]:
    """The tracks of ``labels`` among ``hits``, as sets of hit indices."""
    groups: dict[int, list[int]] = {}
    for hit in hits:
        groups.setdefault(int(labels[hit]), []).append(int(hit))
    return {tuple(g) for g in groups.values()}


def test_the_second_pass_walks_only_the_lone_hits_and_only_above_its_cut():
    record = _half_sure_record()
    pos = as_numpy(record.pos).astype(np.float64)
    graph = graph_from_record(record, min_score=0.5)
    labels = _first_pass().build_graph(graph, pos)
    alone = np.bincount(labels)[labels] == 1
    candidates = second_candidates(labels, graph, pos, 0.5)
    assert (candidates >= 0).any()
    assert not (candidates[~alone] >= 0).any()          # no first-pass track's hit is walked
    sizes = np.bincount(candidates[candidates >= 0])
    assert sizes.min() >= 3
    pid = as_numpy(record.particle_id)
    for c in range(len(sizes)):                          # each candidate is one particle's
        assert len(np.unique(pid[candidates == c])) == 1
        assert np.all(as_numpy(record.scores)[np.isin(as_numpy(record.edge_index[0]),
                                                      np.nonzero(candidates == c)[0])] < 0.9)
    assert not (second_candidates(labels, graph, pos, 0.7) >= 0).any()   # 0.6 < 0.7


def test_the_second_pass_adds_tracks_and_leaves_the_first_pass_alone():
    record = _half_sure_record()
    truth = truth_from_record(record)
    first = _first_pass()
    keep_all = replace(first, second_cut=0.5, second_quality_cut=0.5,
                       second_quality=_always(10.0))
    keep_none = replace(keep_all, second_quality=_always(-10.0))
    labels_first = first.build(record)
    labels_all = keep_all.build(record)
    labels_none = keep_none.build(record)
    tracked = np.nonzero(np.bincount(labels_first)[labels_first] > 1)[0]
    assert _grouping(labels_all, tracked) == _grouping(labels_first, tracked)
    assert _grouping(labels_none, np.arange(len(labels_none))) == _grouping(
        labels_first, np.arange(len(labels_first)))

    def efficiency(labels):
        frame = tracks_frame(record.hit_id, labels, 7)
        return event_summary(evaluate_event(truth, frame, MetricCuts()))["efficiency"]
    assert efficiency(labels_all) > efficiency(labels_first) + 0.2


def test_the_tuners_added_signal_is_what_building_with_its_point_adds():
    record = _pieces_record(seed=6, mu=8.0)
    truth = truth_from_record(record)
    first = _first_pass()
    tuned = tune_second_pass([record], first, budget=0.2, cuts=(0.6, 0.75))
    assert tuned is not None and tuned.added_signal > 0
    assert tuned.added_fakes <= 0.2 * tuned.first_tracks

    def found(builder):
        evaluation = evaluate_event(truth, tracks_frame(record.hit_id, builder.build(record),
                                                        7), MetricCuts())
        tracks = evaluation.tracks
        signal = set(evaluation.particles["particle_id"][evaluation.particles["signal"]])
        return {p for p, m in zip(tracks["particle_id"], tracks["matched"]) if m
                and p in signal}, int((~tracks["matched"].to_numpy(bool)).sum())

    before, fakes_before = found(first)
    after, fakes_after = found(with_second_pass(first, tuned))
    assert len(after - before) == tuned.added_signal and before <= after
    assert fakes_after - fakes_before == tuned.added_fakes


def _labelled(rng: np.random.Generator, n: int, n_finds: int) -> LabelledCandidates:
    """Candidates whose edges score high when they find a particle, low when fake."""
    finds = np.zeros(n, np.int64)
    finds[:n_finds] = np.arange(1, n_finds + 1)
    score = np.where(finds != 0, rng.uniform(0.8, 1.0, n), rng.uniform(0.3, 0.9, n))
    table = pd.DataFrame({"track_id": np.arange(n), "n_hits": rng.integers(3, 10, n),
                          "n_layers": 3, "layer_repeats": 0, "mean_score": score,
                          "min_score": score, "leaving": 0.0, "pt": 2.0, "eta": 0.5,
                          "d0": 0.1, "pt_beamline": 2.0, "ahead": 0, "behind": 0})
    return LabelledCandidates(table, finds, finds == 0)


def test_the_chosen_point_keeps_its_fakes_within_the_budget():
    rng = np.random.default_rng(0)
    labelled = {0.5: [_labelled(rng, 200, 30)], 0.3: [_labelled(rng, 300, 35)]}
    tight = choose_second(labelled, first_tracks=1000, budget=0.005)
    loose = choose_second(labelled, first_tracks=1000, budget=0.2)
    assert tight is not None and tight.added_fakes <= 5
    assert loose.added_signal >= tight.added_signal and loose.added_fakes <= 200
    none_found = {0.5: [LabelledCandidates(labelled[0.5][0].table, np.zeros(200, np.int64),
                                           np.ones(200, bool))]}
    assert choose_second(none_found, first_tracks=1000, budget=0.2) is None


def test_the_tuned_second_pass_reaches_the_builder():
    tuned = choose_second({0.5: [_labelled(np.random.default_rng(1), 200, 30)]}, 1000, 0.05)
    builder = with_second_pass(TrackBuilder(walk_cut=0.9, min_length=5), tuned)
    assert (builder.second_cut, builder.second_quality_cut, builder.second_min_hits) == (
        tuned.cut, tuned.quality_cut, tuned.min_hits)
    assert builder.second_quality == tuned.model
    assert with_second_pass(TrackBuilder(walk_cut=0.9), None).second_cut is None
    with pytest.raises(ValueError, match="second_cut"):
        TrackBuilder(walk_cut=0.5, second_cut=0.6)


def test_tune_tracks_tunes_the_second_pass_with_a_budget_and_writes_it(tmp_path):
    """``tune.second_fake_budget`` reaches the tuner: the tuned builder walks the lone hits
    below its cut with a model, which the tuned tracks config's file gives back; without a
    budget there is no second pass, and a budget out of [0, 1) is refused."""
    from trkx.tracks.stage_config import track_builder, write_tuned_config
    from trkx.tracks.tune.tune_tracks import TrackTuning, tune_tracks

    with pytest.raises(ValueError, match="second_fake_budget"):
        TrackTuning(second_fake_budget=1.5)
    records = [_with_fake_edges(_half_sure_record())]
    builder, figures = tune_tracks(records, TrackBuilder(),
                                   TrackTuning(fake_rate_target=0.01, second_fake_budget=0.5))
    assert builder.second_cut < builder.walk_cut and figures["val_second_signal"] > 0
    assert builder.second_quality is not None
    path = write_tuned_config(tmp_path, builder, {}, figures, "a test")
    assert (tmp_path / "second_quality.json").is_file()
    assert track_builder(path) == builder
    plain, figures = tune_tracks(records, TrackBuilder(), TrackTuning(fake_rate_target=0.01))
    assert plain.second_cut is None and "val_second_signal" not in figures
