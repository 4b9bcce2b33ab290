"""Track quality: the logistic regression, its file's round trip, the builder's cut, and the
tuner's figures equal to building with the chosen point."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch

from tests.tracks_events import broken_after_third_hit, noise_free_simulated_record
from trkx.tracks.builder.building import TrackBuilder
from trkx.tracks.builder.parameters import track_parameters
from trkx.tracks.builder.track_labels import tracks_frame
from trkx.tracks.evaluate.event_truth import truth_from_record
from trkx.tracks.evaluate.metrics import MetricCuts, evaluate_event, overall_summary
from trkx.tracks.fit.quality import FEATURES, QualityModel, fit_quality
from trkx.tracks.fit.track_table import track_table
from trkx.tracks.tune.tuning import tune_cut


def _synthetic_tables(n: int, seed: int) -> tuple[pd.DataFrame, np.ndarray]:
    """Real tracks are long with high scores; fakes short with lower ones (overlapping)."""
    rng = np.random.default_rng(seed)
    real = rng.random(n) < 0.8
    n_hits = np.where(real, rng.integers(6, 15, n), rng.integers(3, 8, n))
    table = pd.DataFrame({
        "n_hits": n_hits, "n_layers": n_hits - rng.integers(0, 2, n), "layer_repeats": 0,
        "mean_score": np.where(real, rng.uniform(0.85, 1.0, n), rng.uniform(0.6, 0.95, n)),
        "min_score": rng.uniform(0.5, 1.0, n), "leaving": rng.uniform(0, 0.2, n),
        "pt": rng.uniform(0.5, 5, n), "eta": rng.uniform(-3, 3, n),
        "chi2_ndf": rng.uniform(0.5, 5, n), "rms_xy": rng.uniform(0.01, 0.1, n),
        "rms_z": rng.uniform(0.1, 1, n)})
    table["layer_repeats"] = table["n_hits"] - table["n_layers"]
    return table, real


def test_the_fitted_score_separates_and_survives_its_file():
    table, real = _synthetic_tables(3000, seed=0)
    model = fit_quality(table, real)
    test, test_real = _synthetic_tables(2000, seed=1)
    q = model.score(test)
    assert q.shape == (2000,) and ((q > 0) & (q < 1)).all()
    # area under the ROC curve on independent tracks
    order = np.argsort(q)
    ranks = np.empty(len(q))
    ranks[order] = np.arange(1, len(q) + 1)
    n_pos, n_neg = test_real.sum(), (~test_real).sum()
    auc = (ranks[test_real].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)
    assert auc > 0.9
    assert model.weights[FEATURES.index("n_hits")] > 0          # longer: more likely real
    assert model.weights[FEATURES.index("logit_mean_score")] > 0
    values = json.loads(json.dumps(model.as_dict()))       # as its file holds it
    again = QualityModel.from_dict(values)
    np.testing.assert_array_equal(again.score(test), q)
    with pytest.raises(ValueError, match=r"quality\.json: weights has 7 numbers for 8 inputs"):
        QualityModel.from_dict({**values, "weights": values["weights"][1:]}, "quality.json")
    with pytest.raises(ValueError, match=r"m\.json: missing key 'bias'"):
        QualityModel.from_dict({k: v for k, v in values.items() if k != "bias"}, "m.json")
    with pytest.raises(ValueError, match="unknown input 'chi2'"):
        QualityModel.from_dict({**values, "features": ["chi2", *values["features"][1:]]})
    with pytest.raises(ValueError, match="both matched and fake"):
        fit_quality(table, np.ones(len(table), bool))


def _figures(record, builder: TrackBuilder) -> dict:
    labels = builder.build(record)
    return overall_summary([evaluate_event(truth_from_record(record),
                                           tracks_frame(record.hit_id, labels, 7),
                                           MetricCuts())])


def test_the_tuned_quality_cut_builds_the_tuned_figures():
    """Every long track broken after its third hit: at length 3 the 3-hit fragments are fakes.
    The quality model learns them; the tuner's figures at its chosen point are exactly those of
    building with that point (TunedCut.apply, what the tuned tracks config holds)."""
    record = broken_after_third_hit(noise_free_simulated_record(seed=5, mu=4.0))
    builder = TrackBuilder(method="components", stitch=False)
    plain = tune_cut([record], builder, fake_target=1.0, cuts=(0.5,), lengths=(3,),
                     forward_lengths=(), short_scores=(None,), quality_cuts=(None,))
    assert plain.fake_rate > 0.2 and plain.quality_cut is None
    tuned = tune_cut([record], builder, fake_target=0.05, cuts=(0.5,), lengths=(3,),
                     forward_lengths=(), short_scores=(None,), quality_cuts=(None, 0.3, 0.5))
    assert tuned.quality_cut in (0.3, 0.5) and tuned.quality is not None
    assert tuned.fake_rate <= 0.05 and tuned.efficiency >= plain.efficiency - 0.02
    chosen = tuned.apply(builder)
    assert chosen.quality_cut == tuned.quality_cut and chosen.quality is tuned.quality
    built = _figures(record, chosen)
    assert built["efficiency"] == pytest.approx(tuned.efficiency)
    assert built["fake_rate"] == pytest.approx(tuned.fake_rate)
    # the quality step's own table is the parameters file's, under the final track ids: the
    # same rows as fitting the final tracks again
    labels, table = chosen.build_with_table(record)
    assert np.array_equal(labels, chosen.build(record)) and table is not None
    again = track_parameters(record, labels, chosen)
    assert len(again) > 10 and table["track_id"].is_unique
    pd.testing.assert_frame_equal(track_parameters(record, labels, chosen, table), again)
    # without a quality step the builder makes no table (the parameters are fitted then)
    assert TrackBuilder(method="components", stitch=False).build_with_table(record)[1] is None
    # a budget of efficiency: the fewest fakes among the points that lose at most that much
    budget = tune_cut([record], builder, fake_target=1.0, cuts=(0.5,), lengths=(3,),
                      forward_lengths=(), short_scores=(None,), quality_cuts=(None, 0.3, 0.5),
                      quality_budget=0.0)
    assert budget.efficiency >= plain.efficiency and budget.fake_rate < plain.fake_rate
    assert budget.quality_cut is not None
    with pytest.raises(ValueError, match=r"quality must be a quality model .* got dict"):
        TrackBuilder(quality={"bias": 1.0})


def test_the_track_table_counts_layers_edges_and_junctions():
    # two straight tracks of 4 hits along x and y; one junction edge between them
    r = np.array([30.0, 70, 110, 150] * 2)
    phi = np.array([0.0] * 4 + [np.pi / 2] * 4)
    pos = np.stack([r, phi, r * 0.5], axis=1)
    volume = np.full(8, 8)
    layer = np.array([2, 4, 4, 6, 2, 4, 6, 8])         # track 0 has two hits on layer 4
    labels = np.array([0, 0, 0, 0, 1, 1, 1, 1])
    src = np.array([0, 1, 2, 4, 5, 6, 1])
    dst = np.array([1, 2, 3, 5, 6, 7, 6])
    score = np.array([0.9, 0.8, 0.7, 1.0, 1.0, 1.0, 0.6])
    table = track_table(labels, pos, volume, layer, src, dst, score)
    assert table["n_layers"].tolist() == [3, 4] and table["layer_repeats"].tolist() == [1, 0]
    assert table["mean_score"].tolist() == pytest.approx([0.8, 1.0])
    assert table["min_score"].tolist() == pytest.approx([0.7, 1.0])
    assert table["leaving"].tolist() == pytest.approx([0.25, 0.25])
    assert table["rms_xy"].max() < 1e-3 and table["pt"].min() > 100    # straight lines


def test_the_tuner_with_the_extension_builds_its_figures_exactly():
    """Every track of >= 10 hits broken after its third and sixth hits. With the extension the
    3-hit pieces a length of 4 dissolves join the rest of their track again (fewer fakes than
    the lengths' formula counts): the tuner builds its shortlist exactly, so the point it
    chooses has the figures of building with it."""
    record = noise_free_simulated_record(seed=5, mu=4.0)
    pid = record.particle_id[record.track_edges[0]]
    keep = torch.ones(record.track_edges.shape[1], dtype=torch.bool)
    for particle in torch.unique(pid):
        own = torch.nonzero(pid == particle).flatten()
        if own.numel() >= 9:
            keep[own[[2, 5]]] = False
    record.edge_index = record.track_edges[:, keep]
    record.scores = torch.ones(record.edge_index.shape[1])
    builder = TrackBuilder(method="components", stitch=False, extend_window_xy=1.0,
                           extend_window_z=3.0)
    grid = dict(cuts=(0.5,), lengths=(3, 4), forward_lengths=(), short_scores=(None,),
                quality_cuts=(None,))
    plain = tune_cut([record], TrackBuilder(method="components", stitch=False),
                     fake_target=0.3, **grid)
    tuned = tune_cut([record], builder, fake_target=0.3, **grid)
    assert plain.min_length == tuned.min_length == 4 and plain.fake_rate > 0.15
    assert tuned.efficiency >= plain.efficiency and tuned.fake_rate < plain.fake_rate - 0.05
    chosen = tuned.apply(builder)
    assert chosen.extend_window_xy == 1.0 and chosen.min_length == 4
    built = _figures(record, chosen)
    assert built["efficiency"] == pytest.approx(tuned.efficiency)
    assert built["fake_rate"] == pytest.approx(tuned.fake_rate)


def test_the_pixel_windows_are_the_windows_unless_set():
    """The pixel hits answer to their own windows when set, to the extension's otherwise."""
    builder = TrackBuilder(method="components", stitch=False, min_length=4,
                           extend_window_xy=2.0, extend_window_z=5.0, extend_pixel_xy=1.0,
                           extend_pixel_z=3.0)
    assert builder._pixel_windows() == (1.0, 3.0)
    builder = TrackBuilder(method="components", stitch=False, min_length=4,
                           extend_window_xy=2.0, extend_window_z=5.0)
    assert (builder.extend_pixel_xy, builder.extend_pixel_z) == (None, None)
    assert builder._pixel_windows() is None
