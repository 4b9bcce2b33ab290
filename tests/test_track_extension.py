"""Extension: a track takes the lone pixel hits on its helix (trkx.tracks.builder.extension)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
import torch

from trkx.data.record_type import Record
from trkx.tracks.builder.building import TrackBuilder
from trkx.tracks.builder.extension import extend_tracks
from trkx.tracks.fit.helix_fit import fit_helices
from trkx.tracks.fit.helix_geometry import helix_geometry, helix_residuals
from trkx.tracks.fit.quality import FEATURES, QualityModel

#: (volume, layer, radius mm) of the barrel layers a central track crosses
LAYERS = [(8, 2, 32.0), (8, 4, 72.0), (8, 6, 116.0), (8, 8, 172.0), (13, 2, 260.0),
          (13, 4, 360.0), (13, 6, 500.0), (13, 8, 660.0), (17, 2, 820.0), (17, 4, 1020.0)]


def helix_hits(radius: float, sense: float, phi0: float, d0: float, z0: float, cot: float,
               radii: np.ndarray) -> np.ndarray:
    """``[n, 3]`` (r, phi, z) where a helix (perigee at distance ``d0`` from the beam line,
    direction ``phi0`` there, turning ``sense``) crosses the cylinders ``radii``, found by
    bisection on its path length."""
    t = np.array([np.cos(phi0), np.sin(phi0)])
    normal = sense * np.array([-t[1], t[0]])                  # towards the centre
    perigee = d0 * np.array([-t[1], t[0]])
    centre = perigee + radius * normal
    start = np.arctan2(*(perigee - centre)[::-1])

    def point(s):
        angle = start + sense * s / radius
        return centre[0] + radius * np.cos(angle), centre[1] + radius * np.sin(angle)

    out = []
    for target in radii:
        low, high = 0.0, np.pi * radius / 2
        for _ in range(80):
            mid = (low + high) / 2
            if np.hypot(*point(mid)) < target:
                low = mid
            else:
                high = mid
        x, y = point(low)
        out.append((np.hypot(x, y), np.arctan2(y, x), z0 + cot * low))
    return np.array(out)


def track_record(hits: np.ndarray, edges: list[tuple[int, int]]) -> Record:
    layer = np.array([(v, lay) for v, lay, _ in LAYERS] * (len(hits) // len(LAYERS) + 1))
    record = Record(edge_index=torch.tensor(edges, dtype=torch.long).T.reshape(2, -1),
                  scores=torch.ones(len(edges)), pos=torch.tensor(hits, dtype=torch.float64),
                  hit_id=torch.arange(len(hits)),
                  volume_id=torch.tensor(layer[: len(hits), 0]),
                  layer_id=torch.tensor(layer[: len(hits), 1]))
    record.num_nodes = len(hits)
    return record


def central_track(sense: float = 1.0, d0: float = 0.3) -> np.ndarray:
    radii = np.array([r for _, _, r in LAYERS])
    return helix_hits(2500.0, sense, 0.4, d0, 15.0, 0.7, radii)


@pytest.mark.parametrize("sense", [1.0, -1.0])
@pytest.mark.parametrize("d0", [0.0, 0.8, -0.8])
def test_the_fitted_helix_passes_through_its_own_hits(sense, d0):
    """The helix geometry rebuilt from a fit's (pT, eta, phi, d0, z0, charge) puts every hit
    of the track on it, ahead of the perigee, for both turning senses and either sign of d0."""
    hits = central_track(sense, d0)
    x, y = hits[:, 0] * np.cos(hits[:, 1]), hits[:, 0] * np.sin(hits[:, 1])
    fit = fit_helices(np.zeros(len(hits), dtype=np.int64), x, y, hits[:, 2]).frame()
    e, dz, s = helix_residuals(helix_geometry(fit), np.zeros(len(hits), dtype=np.int64), x, y,
                               hits[:, 2])
    assert np.abs(e).max() < 1e-3 and np.abs(dz).max() < 1e-3
    assert (s > 0).all() and (np.diff(s) > 0).all()


def test_lone_hits_on_the_helix_join_the_track_and_others_do_not():
    """A track found in its outer layers takes its 3 pixel hits, which no edge reaches, and the
    strip hit its graph lost (13:8); a pixel hit 5 mm off its helix, one behind its perigee
    and a second hit on a strip layer the track has stay alone."""
    hits = central_track()
    off = hits[1].copy()
    off[2] += 5.0                                              # 5 mm along the beam
    behind = hits[2].copy()
    behind[1] += np.pi                                         # the other side of the beam,
    behind[2] = 2 * 15.0 - behind[2]                           # on the helix's line backwards
    twice = hits[4].copy()
    twice[2] += 1.0                                            # 13:2, which the track has
    extra = np.stack([off, behind, twice])
    edges = [(3, 4), (4, 5), (5, 6), (6, 8), (8, 9)]           # no edge reaches hit 7 (13:8)
    record = track_record(np.concatenate([hits, extra]), edges)
    record.volume_id[10:], record.layer_id[10:] = torch.tensor([8, 8, 13]), torch.tensor([4, 6, 2])
    plain = TrackBuilder(walk_cut=0.5, min_length=3).build(record)
    assert len(np.unique(plain[:3])) == 3 and plain[0] != plain[3] and plain[7] != plain[3]
    extended = TrackBuilder(walk_cut=0.5, min_length=3, extend_window_xy=1.0).build(record)
    assert len(np.unique(extended[:10])) == 1                  # the whole particle
    assert len(np.unique(extended[10:])) == 3 and not np.isin(extended[10:], extended[0]).any()


def test_a_track_takes_one_hit_per_layer_and_a_hit_goes_to_its_closest_track():
    hits = central_track()
    layer = np.array([v * 1000 + lay for v, lay, _ in LAYERS])
    near, far = hits[0].copy(), hits[0].copy()
    near[2] += 0.2
    far[2] += 0.6                                              # the same layer, farther off
    pos = np.concatenate([hits, [near, far]])
    layer = np.r_[layer, 8002, 8002]
    labels = np.r_[[100, 101, 102], np.full(7, 7), [103, 104]]  # hits 0-2 and the extras alone
    x, y = pos[:, 0] * np.cos(pos[:, 1]), pos[:, 0] * np.sin(pos[:, 1])
    fit = fit_helices(np.where(labels == 7, 7, -1), x, y, pos[:, 2]).frame()
    out, grown = extend_tracks(labels, pos, layer, fit, 1.0, 3.0)
    assert list(grown) == [7]
    assert (out[:10] == 7).all()                               # the exact hit on 8:2 wins
    assert out[10] == 103 and out[11] == 104                   # the farther ones stay alone
    assert (extend_tracks(labels, pos, layer, fit, 1.0, 3.0, min_hits=8)[0] == labels).all()
    # a second helix 0.5 mm along the beam from the first (its own hits on other layers): a
    # lone hit goes to the helix it lies closer to
    shifted = pos.copy()
    shifted[1, 2] += 0.45
    labels2 = np.r_[[100, 101, 102], np.full(7, 7), [8, 8, 8, 8]]
    pos2 = np.concatenate([shifted[:10], np.tile([[800.0, -2.0, 0.0]], (4, 1))])
    layer2 = np.r_[layer[:10], 18002, 18004, 18006, 18008]
    other = fit.assign(track_id=8, z0=fit["z0"] + 0.5)
    out, grown = extend_tracks(labels2, pos2, layer2, pd.concat([fit, other]), 1.0, 3.0)
    assert out[0] == 7 and out[1] == 8 and out[2] == 7 and list(grown) == [7, 8]


def test_the_grown_tracks_rows_are_fitted_again_and_the_others_kept():
    """With the quality step's table, a track that grows gets the fit of its new hits (its
    hit count, layers, helix); the table stays one row per final track, under final ids."""
    hits = central_track()
    second = helix_hits(1500.0, -1.0, 2.0, 0.1, -30.0, -0.4, np.array([r for *_, r in LAYERS]))
    record = track_record(np.concatenate([hits, second]),
                          [(i, i + 1) for i in range(3, 9)] + [(i, i + 1) for i in range(10, 19)])
    keep_all = QualityModel(mean=(0.0,) * len(FEATURES), scale=(1.0,) * len(FEATURES),
                            weights=(0.0,) * len(FEATURES), bias=5.0)
    builder = TrackBuilder(walk_cut=0.5, min_length=3, quality_cut=0.5, quality=keep_all,
                           extend_window_xy=1.0)
    labels, table = builder.build_with_table(record)
    assert len(np.unique(labels[:10])) == 1 and len(np.unique(labels)) == 2
    assert sorted(table["track_id"]) == sorted(np.unique(labels))
    first = table.set_index("track_id").loc[labels[0]]
    assert first["n_hits"] == 10 and first["n_layers"] == 10
    x, y = hits[:, 0] * np.cos(hits[:, 1]), hits[:, 0] * np.sin(hits[:, 1])
    alone = fit_helices(np.zeros(10, dtype=np.int64), x, y, hits[:, 2]).frame().iloc[0]
    for column in ("pt", "eta", "phi", "d0", "z0"):
        assert first[column] == pytest.approx(alone[column], rel=1e-6, abs=1e-6)
    assert table.set_index("track_id").loc[labels[10], "n_hits"] == 10


def test_extension_windows_are_checked():
    with pytest.raises(ValueError, match="extend_window"):
        TrackBuilder(extend_window_xy=0.0)
    with pytest.raises(ValueError, match="extend_min_hits"):
        TrackBuilder(extend_min_hits=2)


def test_a_layers_second_hit_joins_when_its_residual_matches_the_held_hits():
    """Where two modules overlap a particle leaves two hits on one layer (8:2 at r = 32 and
    34.5 mm). With the overlap windows the track takes the second one, judged against the hit
    it holds on that layer: the fit's error (here its z0 1.5 mm off) is common to both, so the
    true hit's residuals differ from the held one's by ~0 and it joins, while a stray hit
    inside the main windows whose residual differs by 2 mm along the beam stays alone; a track
    gains one hit per layer, and none on a layer it holds two of. Without them nothing joins."""
    hits = central_track()
    layer = np.array([v * 1000 + lay for v, lay, _ in LAYERS])
    sibling = helix_hits(2500.0, 1.0, 0.4, 0.3, 15.0, 0.7, np.array([34.5]))[0]
    stray = helix_hits(2500.0, 1.0, 0.4, 0.3, 15.0, 0.7, np.array([74.0]))[0]
    stray[2] += 2.0                                           # 8:4, 2 mm off along the beam
    third = helix_hits(2500.0, 1.0, 0.4, 0.3, 15.0, 0.7, np.array([33.5]))[0]
    pos = np.concatenate([hits, [sibling, stray, third]])
    layer = np.r_[layer, 8002, 8004, 8002]
    labels = np.r_[np.full(10, 7), [100, 101, 102]]
    x, y = pos[:, 0] * np.cos(pos[:, 1]), pos[:, 0] * np.sin(pos[:, 1])
    fit = fit_helices(np.where(labels == 7, 7, -1), x, y, pos[:, 2]).frame()
    fit["z0"] -= 1.5                                          # an extrapolation error
    plain, grown = extend_tracks(labels, pos, layer, fit, 1.0, 3.0)
    assert (plain == labels).all() and len(grown) == 0
    out, grown = extend_tracks(labels, pos, layer, fit, 1.0, 3.0, overlap=(0.15, 1.0))
    assert out[10] == 7 and list(grown) == [7]                # the overlap's second hit
    assert out[11] == 101 and out[12] == 102    # the stray; 8:2 gained one of its two
    held_twice = np.r_[np.full(11, 7), [101, 102]]            # the track holds 8:2 twice
    out, grown = extend_tracks(held_twice, pos, layer, fit, 1.0, 3.0, overlap=(0.15, 1.0))
    assert (out == held_twice).all() and len(grown) == 0
    with pytest.raises(ValueError, match="overlap"):
        extend_tracks(labels, pos, layer, fit, 1.0, 3.0, overlap=(0.0, 1.0))
    with pytest.raises(ValueError, match="extend_overlap"):
        TrackBuilder(extend_window_xy=1.0, extend_overlap_xy=-0.1)


def test_the_pixel_hits_answer_to_their_own_windows():
    """With ``pixel_windows`` a lone pixel hit 2 mm off the helix along the beam (inside the
    strips' 5 mm window, outside the pixels' 1 mm) stays alone while a strip hit as far off
    joins; the pixel hit on the helix joins either way. Without them both join (one window)."""
    hits = central_track()
    layer = np.array([v * 1000 + lay for v, lay, _ in LAYERS])
    labels = np.r_[[100, 101], np.full(5, 7), [102], np.full(2, 7)]   # 8:2, 8:4, 13:8 alone
    pos = hits.copy()
    pos[1, 2] += 2.0                                          # 8:4, 2 mm off along the beam
    pos[7, 2] += 2.0                                          # 13:8, the same
    x, y = pos[:, 0] * np.cos(pos[:, 1]), pos[:, 0] * np.sin(pos[:, 1])
    fit = fit_helices(np.where(labels == 7, 7, -1), x, y, pos[:, 2]).frame()
    one, _ = extend_tracks(labels, pos, layer, fit, 2.0, 5.0)
    assert (one[[0, 1, 7]] == 7).all()
    own, grown = extend_tracks(labels, pos, layer, fit, 2.0, 5.0, pixel_windows=(1.0, 1.0))
    assert own[0] == 7 and own[1] == 101 and own[7] == 7 and list(grown) == [7]
    with pytest.raises(ValueError, match="pixel windows"):
        extend_tracks(labels, pos, layer, fit, 2.0, 5.0, pixel_windows=(0.0, 1.0))
    with pytest.raises(ValueError, match="extend_pixel_z"):
        TrackBuilder(extend_window_xy=1.0, extend_pixel_z=-1.0)
    builder = TrackBuilder(extend_window_xy=2.0, extend_window_z=5.0, extend_pixel_z=1.0)
    assert builder._pixel_windows() == (2.0, 1.0)         # the unset one is the windows'


def test_a_second_round_extends_from_the_hits_the_first_one_found():
    """A track found in its strips, whose z is tilted by the strips' error (0.01 x (r - 500
    mm)), misses its inner pixel hits by more than the window along the beam; the first round
    takes the outer pixel hits, whose z pins the refitted helix, and the second the rest."""
    hits = central_track()
    radii = hits[:, 0]
    tilted = hits.copy()
    tilted[4:, 2] += 0.01 * (radii[4:] - 500.0)
    record = track_record(tilted, [(4, 5), (5, 6), (6, 7), (7, 8), (8, 9)])
    builder = TrackBuilder(walk_cut=0.5, min_length=3, extend_window_xy=1.0,
                           extend_window_z=4.0, stitch=False)
    once = builder.build(record)
    assert (once[2:4] == once[4]).all() and not np.isin(once[:2], once[4]).any()
    twice = replace(builder, extend_rounds=2).build(record)
    assert (twice == twice[4]).all()                           # the whole particle
    assert (replace(builder, extend_rounds=3).build(record) == twice).all()
    with pytest.raises(ValueError, match="extend_rounds"):
        TrackBuilder(extend_rounds=0)


def test_a_pixel_hit_pins_the_weighted_line_of_a_strip_track():
    """A track of one pixel hit and its strips, whose long strips' z lie 25 and 40 mm off
    (within a strip's length): the line fitted to every hit alike misses the inner pixel
    hits along the beam in any number of rounds; the line weighted by each hit's resolution
    follows the pixel and short-strip hits and takes them all."""
    hits = central_track()
    off = hits.copy()
    off[8:, 2] += np.array([25.0, 40.0])
    record = track_record(off, [(3, 4), (4, 5), (5, 6), (6, 7), (7, 8), (8, 9)])
    builder = TrackBuilder(walk_cut=0.5, min_length=3, extend_window_xy=1.0,
                           extend_window_z=3.0, stitch=False)
    for rounds in (1, 3):
        alike = replace(builder, extend_rounds=rounds).build(record)
        assert not np.isin(alike[:3], alike[3]).any() and (alike[3:] == alike[3]).all()
    weighted = replace(builder, extend_weighted_z=True).build(record)
    assert (weighted == weighted[0]).all()


def test_the_weighted_line_and_its_covariance():
    """Exact hits on a line give back its z0 and cot; the covariance is that of weighted least
    squares: two hits of equal weight at s = 0 and s = L give var(z0) = sigma^2 and var(cot) =
    2 sigma^2 / L^2; a hit of pixel resolution pins the line through it."""
    from trkx.tracks.builder.extension import weighted_lines

    hits = central_track()
    fit = fit_helices(np.zeros(len(hits), np.int64), hits[:, 0] * np.cos(hits[:, 1]),
                      hits[:, 0] * np.sin(hits[:, 1]), hits[:, 2]).frame()
    geometry = helix_geometry(fit)
    x, y = hits[:, 0] * np.cos(hits[:, 1]), hits[:, 0] * np.sin(hits[:, 1])
    volume = np.array([v for v, _, _ in LAYERS])
    line = weighted_lines(geometry, np.zeros(len(hits), np.int64), x, y, hits[:, 2], volume)
    assert line["z0"][0] == pytest.approx(15.0, abs=1e-6)
    assert line["cot"][0] == pytest.approx(0.7, abs=1e-8)
    geometry = {**geometry, "cot": np.zeros(1)}     # two strip hits on the beam axis's side
    s = helix_residuals(geometry, np.zeros(2, np.int64), x[[8, 9]], y[[8, 9]], hits[[8, 9], 2])[2]
    two = weighted_lines(geometry, np.zeros(2, np.int64), x[[8, 9]], y[[8, 9]],
                         hits[[8, 9], 2], np.array([17, 17]), floor=0.0)
    sigma2 = (10.4 / np.sqrt(12.0)) ** 2
    length = s[1] - s[0]
    assert two["var_cot"][0] == pytest.approx(2 * sigma2 / length ** 2, rel=1e-9)
    assert two["var_z0"][0] + 2 * s[0] * two["cov"][0] + s[0] ** 2 * two["var_cot"][0] == \
        pytest.approx(sigma2, rel=1e-9)       # the variance of the line at the first hit
    pinned = weighted_lines(geometry, np.zeros(3, np.int64), x[[3, 8, 9]], y[[3, 8, 9]],
                            hits[[3, 8, 9], 2] + np.array([0.0, 30.0, -30.0]),
                            np.array([8, 17, 17]))
    s3 = helix_residuals(geometry, np.zeros(1, np.int64), x[[3]], y[[3]], hits[[3], 2])[2]
    assert pinned["z0"][0] + pinned["cot"][0] * s3[0] == pytest.approx(hits[3, 2], abs=0.05)
