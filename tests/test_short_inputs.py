"""The short-track model's inputs beyond the track's own fit (trkx.tracks.fit.short_inputs): the pT
of the circle through the beam line, and the layers where a track's helix goes on into hits
that are not its own (a piece's particle goes on; a whole short particle's does not)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tests.test_short_track_model import _pieces_record
from trkx.arrays import as_numpy
from trkx.tracks.builder.building import TrackBuilder
from trkx.tracks.builder.graph import graph_from_record
from trkx.tracks.builder.track_labels import tracks_frame
from trkx.tracks.evaluate.event_truth import truth_from_record
from trkx.tracks.evaluate.metrics import MetricCuts, evaluate_event
from trkx.tracks.fit.quality import SHORT_FEATURES, QualityModel, fit_quality
from trkx.tracks.fit.short_inputs import beamline_pt
from trkx.tracks.fit.track_table import track_table


def test_the_beamline_pt_is_the_circle_through_the_origin():
    """Hits on a circle of radius 2 m through the origin, with a 3 mm offset on the middle one
    for the free fit to bend to: the beam-line circle keeps 2 m (pT = 0.2998 * 2 T * 2 m);
    hits on a line through the origin are straight (1e3 GeV)."""
    radius, centre = 2000.0, np.array([0.0, 2000.0])
    angles = np.array([-np.pi / 2 + 0.02, -np.pi / 2 + 0.04, -np.pi / 2 + 0.06])
    x, y = centre[0] + radius * np.cos(angles), centre[1] + radius * np.sin(angles)
    pt = beamline_pt(np.zeros(3, np.int64), 1, x, y)
    assert pt[0] == pytest.approx(0.299792458e-3 * 2.0 * radius, rel=1e-9)
    line = beamline_pt(np.zeros(3, np.int64), 1, np.array([30.0, 70.0, 110.0]),
                       np.array([15.0, 35.0, 55.0]))
    assert line[0] == 1e3


def test_a_piece_goes_on_and_a_whole_short_particle_does_not():
    """Particles of >= 9 hits cut into pieces after their 3rd-5th hit, beside particles that
    are short (noise-free pile-up 8): the short pieces' helices meet their particles' other
    hits ahead of or behind them; the whole short particles' meet nothing, and the short-track
    model fitted on the continuation tells them apart better than without it."""
    record = _pieces_record(seed=6, mu=8.0)
    builder = TrackBuilder(method="components", stitch=False)
    labels = builder.build(record)
    truth = truth_from_record(record)
    evaluation = evaluate_event(truth, tracks_frame(record.hit_id, labels, 7), MetricCuts())
    graph = graph_from_record(record, min_score=0.5)
    table = track_table(labels, as_numpy(record.pos), graph.layer // 1000,
                        graph.layer % 1000, graph.src, graph.dst, graph.score)
    assert (table.loc[table["n_hits"] < 3, ["ahead", "behind"]].to_numpy() == 0).all()
    table = table[table["n_hits"] >= 3].reset_index(drop=True)
    tracks = evaluation.tracks.set_index("track_id").loc[table["track_id"]]
    short = ((table["n_hits"] >= 3) & (table["n_hits"] < 8)).to_numpy()
    pid = as_numpy(record.particle_id).astype(np.int64)
    _, inverse, counts = np.unique(pid, return_inverse=True, return_counts=True)
    per_particle = counts[inverse]                 # each hit's particle's hit count
    pure_whole = np.zeros(len(table), bool)       # a track of exactly one particle's hits
    for row, track in enumerate(table["track_id"].to_numpy()):
        own = labels == track
        pure_whole[row] = len(np.unique(pid[own])) == 1 and per_particle[own][0] == own.sum()
    whole = tracks["matched"].to_numpy(bool) & short & pure_whole
    piece = ~tracks["matched"].to_numpy(bool) & short
    goes_on = (table["ahead"] + table["behind"]).to_numpy() > 0
    assert whole.sum() >= 20 and piece.sum() >= 20
    assert goes_on[piece].mean() >= 0.9
    assert goes_on[whole].mean() <= 0.1
    assert (table.loc[~short, ["ahead", "behind"]].to_numpy() == 0).all()
    rows, matched = table[short], whole[short]
    new = fit_quality(rows, matched, features=SHORT_FEATURES).score(rows)
    own_fit_only = SHORT_FEATURES[:-3]       # without the beam-line pT and the continuation
    old = fit_quality(rows, matched, features=own_fit_only).score(rows)
    errors = lambda q: int(((q >= 0.5) != matched).sum())
    assert errors(new) < errors(old)


def test_a_short_track_model_of_any_inputs_survives_its_file():
    """A model of the track's own fit only and one of every input read back from their files'
    contents score alike."""
    rng = np.random.default_rng(3)
    n = 400
    table = {"n_hits": rng.integers(3, 7, n), "n_layers": 3, "layer_repeats": 0,
             "mean_score": rng.uniform(0.9, 1, n), "min_score": rng.uniform(0.8, 1, n),
             "leaving": rng.uniform(0, 0.2, n), "pt": rng.uniform(0.5, 4, n),
             "eta": rng.uniform(-3, 3, n), "d0": rng.normal(0, 1, n),
             "pt_beamline": rng.uniform(0.5, 4, n), "ahead": rng.integers(0, 3, n),
             "behind": rng.integers(0, 3, n)}
    table = pd.DataFrame(table)
    label = (table["ahead"].to_numpy() == 0) & (rng.random(n) < 0.8)
    for features in (SHORT_FEATURES[:-3], SHORT_FEATURES):
        model = fit_quality(table, label, features=features)
        again = QualityModel.from_dict(model.as_dict())
        assert again.features == features
        np.testing.assert_array_equal(again.score(table), model.score(table))
