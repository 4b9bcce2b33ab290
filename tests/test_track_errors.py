"""The calibrated fit (trkx.tracks.fit.covariance): on tracks traced through the solenoid with
the scattering and the hit resolutions it models, its chi2 / ndf is a chi2 / ndf and its errors
are the spread of the parameters (pulls of width 1)."""

from __future__ import annotations

import numpy as np
import pytest

from trkx.tracks.fit.covariance import calibrated_fit, scattering_angles
from trkx.tracks.fit.field_map import fit_in_field, fitted_hits, relative_field
from trkx.tracks.fit.helix_fit import PT_PER_TESLA_MM, hit_resolutions

BARREL_RADII = (32.0, 72.0, 116.0, 172.0, 260.0, 360.0, 500.0, 660.0, 820.0, 1020.0)


def _barrel_volume(radius: float) -> int:
    return 8 if radius < 200 else 13 if radius < 700 else 17


def _scattered_track(pt: float, eta: float, rng: np.random.Generator, step: float = 1.0):
    """Hits ``(x, y, z, volume)`` on the barrel layers of a positive particle from ``(0, 0,
    0)``: traced in the solenoid, kicked at each layer by the fit's own Highland angles (the
    material from that layer to the next) and measured with the fit's own resolutions (across
    the track and along the beam)."""
    kappa0 = PT_PER_TESLA_MM * 2.0 / pt
    x = y = z = 0.0
    direction, cot = 0.3, np.sinh(eta)
    hits = []
    radii = list(BARREL_RADII)
    while radii:
        bend = -kappa0 * relative_field(np.array([z + 0.5 * step * cot]))[0] * step
        direction += 0.5 * bend
        x, y, z = x + step * np.cos(direction), y + step * np.sin(direction), z + step * cot
        direction += 0.5 * bend
        if np.hypot(x, y) >= radii[0]:
            volume = _barrel_volume(radii.pop(0))
            fine, sigma_z, _ = (v[0] for v in hit_resolutions(np.array([volume])))
            normal = np.array([-np.sin(direction), np.cos(direction)])
            across = rng.normal(0.0, fine)
            hits.append((x + across * normal[0], y + across * normal[1],
                         z + rng.normal(0.0, sigma_z), volume))
            following = _barrel_volume(radii[0]) if radii else volume
            theta0 = scattering_angles(np.array([volume]), np.array([following]),
                                       np.array([False]), np.array([pt]),
                                       np.array([np.arcsinh(cot)]))[0]
            sin_theta = 1.0 / np.sqrt(1.0 + cot * cot)
            direction += rng.normal(0.0, theta0) / sin_theta
            cot -= rng.normal(0.0, theta0) / sin_theta ** 2
        if abs(z) > 1000.0:
            break
    return tuple(np.array(column) for column in zip(*hits))


def _calibrated_tracks(pt_range: tuple[float, float], tracks: int = 300, seed: int = 7):
    """``(calibrated fit, robust fit, true pT, true eta)`` of ``tracks`` tracks traced by
    :func:`_scattered_track` (pT uniform in ``pt_range``, |eta| < 0.9)."""
    rng = np.random.default_rng(seed)
    columns: list[list[np.ndarray]] = [[], [], [], [], []]
    truth = []
    for track in range(tracks):
        pt, eta = rng.uniform(*pt_range), rng.uniform(-0.9, 0.9)
        x, y, z, volume = _scattered_track(pt, eta, rng)
        for store, values in zip(columns, (np.full(len(x), track), x, y, z, volume)):
            store.append(values)
        truth.append((pt, eta))
    ids, x, y, z, volume = (np.concatenate(c) for c in columns)
    fit = fit_in_field(ids, x, y, z, volume, "solenoid")
    layer = np.concatenate([np.arange(np.count_nonzero(ids == t)) for t in range(tracks)])
    calibrated = calibrated_fit(fit, ids, *fitted_hits(fit, ids, x, y, z), z, volume, layer)
    pt, eta = np.array(truth).T
    return calibrated, fit, pt, eta


@pytest.mark.slow
def test_the_calibrated_fit_has_a_chi2_and_pulls_of_width_one() -> None:
    calibrated, fit, pt, eta = _calibrated_tracks((1.0, 5.0))

    def width(values: np.ndarray) -> float:
        return float(1.4826 * np.median(np.abs(values - np.median(values))))

    chi2 = calibrated.chi2_ndf
    assert 0.8 < np.median(chi2) < 1.15                  # 2 n - 5 ~ 15: median chi2/ndf ~0.96
    assert np.mean(chi2) == pytest.approx(1.0, abs=0.15)
    for name, value, true in (("d0", calibrated.d0, 0.0), ("z0", calibrated.z0, 0.0),
                              ("eta", calibrated.eta, eta), ("pt", calibrated.pt, pt),
                              ("phi", calibrated.phi, None)):
        error = getattr(calibrated, f"{name}_err")
        if true is None:     # phi at the perigee: the start direction plus half a kick at most
            continue
        pull = (value - true) / error
        assert 0.8 < width(pull) < 1.25, name
        assert abs(np.median(pull)) < 0.25, name
    # the calibrated d0 and z0 are better than the robust fit's
    assert width(calibrated.z0) < width(fit.z0) and width(calibrated.d0) <= width(fit.d0)


@pytest.mark.slow
def test_the_pt_error_is_that_of_the_robust_fits_curvature() -> None:
    """Where the scattering dominates (0.5-1 GeV), the GLS's curvature variance understates the
    spread of the robust fit's curvature, which weighs the hits by their resolution alone (the
    pT pull's width was 1.28 with it); its own weights' variance gives the spread."""
    calibrated, _, pt, _ = _calibrated_tracks((0.5, 1.0))
    pull = (calibrated.pt - pt) / calibrated.pt_err
    width = 1.4826 * np.median(np.abs(pull - np.median(pull)))
    assert 0.9 < width < 1.22                             # measured 1.16


def test_the_compiled_least_squares_is_the_numpy_loop() -> None:
    """The parallel compiled kernel gives the plain loop's chi2, variances and corrections."""
    from trkx.tracks.fit.covariance import _gls_numpy, _gls_per_track

    rng = np.random.default_rng(3)
    lengths = [3, 7, 12, 2, 9]
    starts = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    n = int(starts[-1])
    s = np.concatenate([np.sort(rng.uniform(30, 1000, k)) for k in lengths])
    arrays = (s, rng.normal(0, 0.05, n), rng.normal(0, 0.5, n), rng.uniform(0.01, 0.05, n),
              rng.uniform(0.01, 3.0, n), 0.5 * s * s * rng.uniform(0.8, 1.0, n),
              rng.uniform(1e-4, 1e-3, n), rng.uniform(1e-4, 2e-3, n),
              np.repeat(rng.choice([-1.0, 1.0], len(lengths)), lengths))
    for compiled, plain in zip(_gls_per_track(starts, *arrays), _gls_numpy(starts, *arrays)):
        np.testing.assert_allclose(compiled, plain, rtol=1e-9, atol=1e-12)


def test_the_material_follows_the_crossings() -> None:
    """The scattering after a crossing is the measured material to the next one: a short-strip
    endcap disk scatters more than a pixel layer, the step from the pixels to the strips more
    than a pixel layer, another module of the same layer least; a pair not measured takes
    its first crossing's group."""
    from trkx.tracks.fit.covariance import (
        MATERIAL_BETWEEN_LAYERS,
        MATERIAL_WITHIN_LAYER,
        material_after,
    )

    volume = np.array([8, 8, 8, 14, 12, 9, 17])
    following = np.array([8, 13, 8, 14, 16, 7, 16])
    same = np.array([False, False, True, False, False, True, False])
    np.testing.assert_array_equal(material_after(volume, following, same), [
        MATERIAL_BETWEEN_LAYERS[(8, 8)], MATERIAL_BETWEEN_LAYERS[(8, 13)],
        MATERIAL_WITHIN_LAYER[8], MATERIAL_BETWEEN_LAYERS[(12, 12)],
        MATERIAL_BETWEEN_LAYERS[(12, 16)], MATERIAL_WITHIN_LAYER[7],
        MATERIAL_BETWEEN_LAYERS[(17, 17)]])
    eta = np.array([0.0, 0.0, 2.5])          # 1 GeV each: pT = p / cosh(eta)
    angles = scattering_angles(np.array([8, 8, 12]), np.array([8, 13, 12]),
                               np.zeros(3, dtype=bool), 1.0 / np.cosh(eta), eta)
    assert angles[0] < angles[1] < angles[2]


def test_no_fitted_track_gives_an_empty_fit() -> None:
    """An event whose tracks are all too short: nothing to fit, no error."""
    x, y, z = np.array([30.0, 70.0]), np.array([1.0, 2.0]), np.array([0.0, 5.0])
    ids, volume, layer = np.array([-1, -1]), np.array([8, 8]), np.array([2, 4])
    fit = fit_in_field(ids, x, y, z, volume, "solenoid")
    calibrated = calibrated_fit(fit, ids, *fitted_hits(fit, ids, x, y, z), z, volume, layer)
    assert len(calibrated.track_id) == 0 and len(calibrated.pt_err) == 0
