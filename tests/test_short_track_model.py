"""The short tracks' own quality model: it reads where a track comes from (|d0|) and its pT,
the tuner's figures for every (quality cut, short-track cut) equal building with that point
(a short track the model keeps is not judged by the quality cut), and the tuned point builds
its figures."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
import torch

from tests.test_track_quality import _figures
from tests.tracks_events import noise_free_simulated_record
from trkx.tracks.builder.building import TrackBuilder
from trkx.tracks.builder.graph import graph_from_record
from trkx.tracks.builder.track_labels import tracks_frame
from trkx.tracks.evaluate.event_truth import truth_from_record
from trkx.tracks.evaluate.metrics import MetricCuts, evaluate_event
from trkx.tracks.fit.quality import SHORT_FEATURES, QualityModel, fit_quality
from trkx.tracks.tune.length_figures import length_figures
from trkx.tracks.tune.tuning import (
    _candidates_table,
    _mean_scores,
    _short_model,
    _track_table,
    tune_cut,
)


def _short_tables(n: int, seed: int) -> tuple[pd.DataFrame, np.ndarray]:
    """Short tracks alike in every input of the quality model but where they come from: the
    real ones start at the beam line (|d0| ~ 0.05 mm), the pieces anywhere (~ 1 mm)."""
    rng = np.random.default_rng(seed)
    real = rng.random(n) < 0.3
    n_hits = rng.integers(3, 7, n)
    return pd.DataFrame({
        "n_hits": n_hits, "n_layers": n_hits, "layer_repeats": 0,
        "mean_score": rng.uniform(0.9, 1.0, n), "min_score": rng.uniform(0.8, 1.0, n),
        "leaving": rng.uniform(0, 0.2, n), "pt": rng.uniform(1.0, 4.0, n),
        "eta": rng.uniform(-3, 3, n), "pt_beamline": rng.uniform(1.0, 4.0, n),
        "ahead": rng.integers(0, 3, n), "behind": rng.integers(0, 3, n),
        "d0": np.where(real, rng.normal(0, 0.05, n), rng.normal(0, 1.5, n))}), real


def _auc(score: np.ndarray, label: np.ndarray) -> float:
    ranks = np.empty(len(score))
    ranks[np.argsort(score)] = np.arange(1, len(score) + 1)
    n_pos, n_neg = label.sum(), (~label).sum()
    return float((ranks[label].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def test_the_short_track_model_reads_d0_and_survives_its_file():
    table, real = _short_tables(3000, seed=0)
    test, test_real = _short_tables(2000, seed=1)
    plain = fit_quality(table, real)
    short = fit_quality(table, real, features=SHORT_FEATURES)
    assert _auc(plain.score(test), test_real) < 0.6 < 0.9 < _auc(short.score(test), test_real)
    assert short.weights[SHORT_FEATURES.index("log_abs_d0")] < 0
    again = QualityModel.from_dict(short.as_dict())
    assert again.features == SHORT_FEATURES
    np.testing.assert_array_equal(again.score(test), short.score(test))


def _pieces_record(seed: int, mu: float):
    """The truth graph, its edges scored in [0.6, 1) (seeded), less one edge after the 3rd to
    5th hit of every particle of >= 9 hits: short pieces (fakes) among short particles."""
    record = noise_free_simulated_record(seed=seed, mu=mu)
    edges = record.track_edges
    pid = record.particle_id[edges[0]]
    generator = torch.Generator().manual_seed(seed)
    keep = torch.ones(edges.shape[1], dtype=torch.bool)
    for particle in torch.unique(pid):
        own = torch.nonzero(pid == particle).flatten()
        if own.numel() >= 9:
            keep[own[int(torch.randint(2, 5, (1,), generator=generator))]] = False
    record.edge_index = edges[:, keep]
    record.scores = 0.6 + 0.4 * torch.rand(record.edge_index.shape[1], generator=generator)
    return record


def test_every_short_track_point_builds_its_figures_and_the_tuned_point_too():
    """At length 8 the pieces and the short particles are the short candidates. The formulas
    of each (quality cut, short-track cut) equal building with that point, and at the quality
    cut 0.99 some short tracks the model keeps score below it: they are spared by both."""
    record = _pieces_record(seed=6, mu=8.0)
    builder = TrackBuilder(method="components", stitch=False)
    truth = truth_from_record(record)
    labels = builder.build(record)
    evaluation = evaluate_event(truth, tracks_frame(record.hit_id, labels, 7), MetricCuts())
    table = _track_table(evaluation, _mean_scores(record, labels, 0.5))
    rows = _candidates_table(record, labels, graph_from_record(record, min_score=0.5)
                             ).set_index("track_id").loc[table["track_id"].to_numpy()
                                                         ].reset_index()
    matched = table["matched"].to_numpy(bool)
    quality = fit_quality(rows, matched)
    short = (rows["n_hits"].to_numpy() >= 3) & (rows["n_hits"].to_numpy() < 8)
    assert 0 < matched[short].mean() < 1
    short_model = fit_quality(rows[short], matched[short], features=SHORT_FEATURES)
    table["quality"] = quality.score(rows)
    table["short_quality"] = short_model.score(rows)
    n_signal = int(evaluation.particles["signal"].sum())
    figures = set()
    kept = short & (table["short_quality"].to_numpy() >= 0.5)
    assert (table["quality"].to_numpy()[kept] < 0.99).any()         # sparing matters
    for kappa in (None, 0.99):
        for lam in (None, 0.2, 0.5, 0.8, 0.95):
            point = replace(builder, min_length=8, quality_cut=kappa, quality=quality,
                            short_quality_cut=lam, short_quality=short_model)
            built = _figures(record, point)
            eff, fake = length_figures(table, n_signal, 8, 8, 2.0, None, kappa, lam)
            assert eff == pytest.approx(built["efficiency"]), (kappa, lam)
            assert fake == pytest.approx(built["fake_rate"]), (kappa, lam)
            figures.add((round(eff, 6), round(fake, 6)))
    assert len(figures) >= 5                                  # the short-track cut matters
    tuned = tune_cut([record], builder, fake_target=0.04, cuts=(0.5,), lengths=(8,),
                     forward_lengths=(), short_scores=(None,), quality_cuts=(None,),
                     short_quality_cuts=(None, 0.2, 0.5, 0.8))
    assert tuned.short_quality_cut is not None and tuned.short_quality is not None
    chosen = tuned.apply(builder)
    assert chosen.short_quality_cut == tuned.short_quality_cut
    assert chosen.short_quality is tuned.short_quality
    built = _figures(record, chosen)
    assert built["efficiency"] == pytest.approx(tuned.efficiency)
    assert built["fake_rate"] == pytest.approx(tuned.fake_rate)


def test_finishing_from_the_candidates_table_builds_what_fitting_each_point_builds():
    """The tuner hands TrackBuilder.finish the candidates' track table, made once per cut:
    at every point (lengths, quality cut, short-track cut, extension) the tracks and their
    table are those finish makes when it fits the tracks itself."""
    record = _pieces_record(seed=6, mu=8.0)
    builder = TrackBuilder(method="components", stitch=False, extend_window_xy=2.0,
                           extend_window_z=5.0, extend_rounds=2)
    graph = graph_from_record(record, min_score=0.5)
    pos = record.pos.numpy()
    labels = replace(builder, extend_window_xy=None).build_graph(graph, pos)
    candidates = _candidates_table(record, labels, graph)
    assert len(candidates) == len(np.unique(labels))           # every candidate listed
    quality = fit_quality(candidates, candidates["n_hits"].to_numpy() >= 9)
    short_model = fit_quality(candidates, candidates["n_hits"].to_numpy() >= 4,
                              features=SHORT_FEATURES)
    changed = set()
    for length, kappa, lam in ((3, None, None), (8, 0.5, None), (8, 0.9, 0.5),
                               (6, None, 0.3), (5, 0.7, 0.8)):
        point = replace(builder, min_length=length, quality_cut=kappa, quality=quality,
                        short_quality_cut=lam, short_quality=short_model)
        fitted, fitted_table = point.finish(labels, graph, pos)
        given, given_table = point.finish(labels, graph, pos, candidates)
        np.testing.assert_array_equal(given, fitted)
        if fitted_table is None:
            assert given_table is None
        else:
            pd.testing.assert_frame_equal(given_table, fitted_table)
        changed.add(len(np.unique(fitted)))
    assert len(changed) >= 3                                  # the points differ


def test_the_short_track_model_learns_what_finds_signal_against_the_fakes():
    """Short candidates: signal tracks (pT 1-4 GeV), fakes and twice as many matched tracks of
    particles below the signal's pT, both at 0.3-0.9 GeV. The matched low-pT tracks move
    neither the efficiency nor the fake rate, so they are left out of the fit: the model
    scores the fakes low and the signal high (taken as positives, they would lift the fakes'
    scores to about 2 / 3)."""
    rng = np.random.default_rng(3)
    kinds = np.repeat(["signal", "fake", "other"], [600, 600, 1200])
    n = len(kinds)
    n_hits = rng.integers(3, 6, n)
    pooled = pd.DataFrame({
        "n_hits": n_hits, "n_layers": n_hits, "layer_repeats": 0,
        "mean_score": rng.uniform(0.9, 1.0, n), "min_score": rng.uniform(0.8, 1.0, n),
        "leaving": rng.uniform(0, 0.2, n), "eta": rng.uniform(-3, 3, n),
        "pt": np.where(kinds == "signal", rng.uniform(1.0, 4.0, n), rng.uniform(0.3, 0.9, n)),
        "d0": rng.normal(0, 0.05, n), "ahead": 0, "behind": 0})
    pooled["pt_beamline"] = pooled["pt"]
    table = pd.DataFrame({"matched": kinds != "fake",
                          "signal_pid": np.where(kinds == "signal", np.arange(1, n + 1), 0)})
    model = _short_model(pooled, table, longest=6)
    score = model.score(pooled)
    assert np.median(score[kinds == "fake"]) < 0.1
    assert np.median(score[kinds == "signal"]) > 0.9
    assert _short_model(pooled, table.assign(signal_pid=0), longest=6) is None
