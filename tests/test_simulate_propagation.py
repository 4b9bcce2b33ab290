"""Propagation physics of the simulator on single tracks (no scattering, no noise)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from trkx.data.detector import load_detector
from trkx.data.particle_id import encode_particle_id
from trkx.data.simulate import PhysicsConfig, SimulationConfig, simulate_event
from trkx.data.simulate.helix import cylinder_crossings, helix_radius, position_at, turn_sense

FIELD = 2.0
IDEAL = PhysicsConfig(multiple_scattering=False, hadronic_scale=0.0, hit_efficiency=1.0)


def one_track(pt: float, eta: float, phi: float, charge: int = 1,
              vertex: tuple[float, float, float] = (0.0, 0.0, 0.0)) -> pd.DataFrame:
    return pd.DataFrame({
        "particle_id": encode_particle_id(np.array([1]), np.array([1])),
        "vx": [vertex[0]], "vy": [vertex[1]], "vz": [vertex[2]],
        "px": [pt * np.cos(phi)], "py": [pt * np.sin(phi)], "pz": [pt * np.sinh(eta)],
        "q": [charge]})


def simulate_ideal(particles: pd.DataFrame, physics: PhysicsConfig = IDEAL,
                   seed: int = 0) -> dict[str, pd.DataFrame]:
    config = SimulationConfig(physics=physics, noise_fraction=0.0)
    return simulate_event(particles, np.random.default_rng(seed), config)


def test_radius_is_pt_over_03_b():
    assert helix_radius(np.array([1.0]), np.array([1.0]), FIELD)[0] == pytest.approx(
        1000.0 / (0.299792458 * FIELD))


def test_helix_points_lie_on_the_analytic_circle():
    pt, phi0, charge = 0.8, 0.7, 1.0
    radius = 1000.0 * pt / (0.299792458 * FIELD)
    sense = turn_sense(np.array([charge]), FIELD)[0]
    assert sense == -1.0  # a positive charge turns clockwise in a field along +z
    s = np.linspace(0.0, 2.5 * radius, 50)
    x0 = np.array([[1.0, -2.0, 3.0]])
    points = position_at(x0, np.full(50, phi0), np.full(50, 0.5), np.full(50, radius),
                         np.full(50, sense), s)
    centre = x0[0, :2] + sense * radius * np.array([-np.sin(phi0), np.cos(phi0)])
    np.testing.assert_allclose(np.hypot(*(points[:, :2] - centre).T), radius, rtol=1e-12)
    np.testing.assert_allclose(points[:, 2], 3.0 + 0.5 * s)
    # crossing a cylinder of radius rho from the origin: chord rho, s = 2 R asin(rho / 2R)
    rho = np.array([300.0])
    s1, s2 = cylinder_crossings(np.zeros((1, 1, 3)), np.array([[phi0]]), np.array([[radius]]),
                                np.array([[sense]]), rho)
    expected = 2 * radius * np.arcsin(rho[0] / (2 * radius))
    assert min(s1[0, 0], s2[0, 0]) == pytest.approx(expected, rel=1e-9)


def test_simulated_hits_follow_the_circle_of_radius_pt_over_03_b():
    pt, phi0 = 1.5, -2.0
    out = simulate_ideal(one_track(pt, 0.3, phi0, charge=-1))
    truth = out["truth"]
    assert len(truth) >= 10
    radius = 1000.0 * pt / (0.299792458 * FIELD)
    sense = 1.0  # negative charge: anticlockwise
    centre = sense * radius * np.array([-np.sin(phi0), np.cos(phi0)])
    distance = np.hypot(truth["tx"] - centre[0], truth["ty"] - centre[1])
    np.testing.assert_allclose(distance, radius, atol=2e-3)  # float32 output, mm


def test_stiff_central_track_hits_every_barrel_layer_and_doubles_only_in_overlaps():
    detector = load_detector()
    barrel_layers = {(8, 2), (8, 4), (8, 6), (8, 8), (13, 2), (13, 4), (13, 6), (13, 8),
                     (17, 2), (17, 4)}
    n_doubles = 0
    for phi in np.linspace(-3.0, 3.0, 12):
        out = simulate_ideal(one_track(100.0, 0.05, phi))
        hits, truth = out["hits"], out["truth"]
        per_layer = hits.groupby(["volume_id", "layer_id"]).size()
        assert set(per_layer.index) == barrel_layers
        assert per_layer.max() <= 4
        index = detector.module_index(hits["volume_id"], hits["layer_id"], hits["module_id"])
        local = detector.global_to_local(index, truth[["tx", "ty", "tz"]].to_numpy())
        # every hit's module really contains the crossing: a second hit in a layer only
        # where two modules overlap
        assert np.all(np.abs(local[:, 2]) < 1e-2)
        assert np.all(detector.contains(index, local[:, 0], local[:, 1]))
        n_doubles += int((per_layer > 1).sum())
    assert 0 < n_doubles < 12 * len(barrel_layers)


def test_low_pt_particle_curls_back_before_the_strips():
    for pt, volumes_allowed in ((0.07, {8}), (0.2, {8, 13})):
        physics = PhysicsConfig(multiple_scattering=False, hadronic_scale=0.0, hit_efficiency=1.0,
                                min_pt=0.05)
        out = simulate_ideal(one_track(pt, 0.0, 1.0), physics)
        hits = out["hits"]
        assert len(hits) > 0
        assert set(hits["volume_id"]) <= volumes_allowed
        radius = 1000.0 * pt / (0.299792458 * FIELD)
        assert np.hypot(hits["x"], hits["y"]).max() <= 2 * radius + 5.0
        # it curls back: at most one outward and one inward pass (<= 2 crossings per layer,
        # plus overlaps)
        assert hits.groupby(["volume_id", "layer_id"]).size().max() <= 4


def test_particle_ends_at_its_recorded_interaction_vertex():
    track = one_track(5.0, 0.1, 0.3)
    end = np.array([[150.0 * np.cos(0.3), 150.0 * np.sin(0.3), 15.0]])
    config = SimulationConfig(physics=IDEAL, noise_fraction=0.0)
    out = simulate_event(track, np.random.default_rng(0), config, end_points=end)
    radii = np.hypot(out["truth"]["tx"], out["truth"]["ty"])
    assert len(radii) >= 3
    assert radii.max() < 160.0
