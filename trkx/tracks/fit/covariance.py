"""Each track's parameter errors and a chi2 that is a chi2: the hits' resolutions and the
multiple scattering in the material the track crossed.

A track's residuals from its fitted helix (trkx.tracks.fit.field_map: transverse ``e_i``, the
distance to the circle, and longitudinal ``f_i = z_i - z0 - s_i cot(theta)``, at transverse path
``s_i`` from the perigee) are correlated: a scattering at crossing ``k`` bends every later hit.
Their covariance, hits in path order,

    V_ij = delta_ij sigma_i^2 + sum_{k: s_k < min(s_i, s_j)} a_k^2 (s_i - s_k)(s_j - s_k),

with ``sigma_i`` the hit's resolution across the track (the module's fine pitch / sqrt(12), and
in an endcap its coarse radial pitch projected on the circle's normal, as the helix fit
weighs it; along the beam the coarse pitch, or the radial one times ``cot(theta)``) and
``a_k`` the scattering angle at crossing ``k`` seen in that projection: ``theta0_k /
sin(theta)`` across, ``theta0_k / sin(theta)^2`` along. ``theta0_k`` is Highland's angle
(trkx.data.simulate.physics) for the momentum ``p = pT cosh(eta)`` through the material
between crossing ``k`` and the next, ``x / X0 = m / cos(alpha)`` at incidence ``cos(alpha) =
sin(theta)`` in a barrel and ``|cos(theta)|`` on a disk. ``m``, the material at normal
incidence, is measured on the real sample event's true crossings by the kicks of their polar
angle (trkx.realism.material.material_between_crossings; `python benchmarks/sim_vs_real.py
--material`) for each pair of volume groups (the crossing's and the next's:
:data:`MATERIAL_BETWEEN_LAYERS`), and for the next crossing on the same layer (overlapping
modules: :data:`MATERIAL_WITHIN_LAYER`). The real detector is not the simulator's uniform
silicon-plus-support: a short-strip endcap disk and what lies behind it is 0.18 X0, the pixel
layers 0.01, the step from the pixels to the strips 0.04-0.06 (docs/levers.md, "The real
detector's material, crossing by crossing"). Across the track the strip disks scatter more
than their material: the kicks of the true azimuth, less the field map's bend, are 1.5-2.5x
as wide as the polar angle's from a crossing on a strip disk or into one (the field beyond
the solenoid's end is not the map's, and the fit bends as the map does), so ``a_k`` across
takes the material those kicks measure there (:data:`MATERIAL_ACROSS`: event 21001's pT pull
at |eta| 2-3 1.93 -> 1.28).

Linearised around the fit, the residuals move with the parameters as ``J = [1, s, g(s)]``
across (``d0``, ``phi``, the curvature ``kappa``; ``g = s^2 / 2``, in the solenoid ``G(s)`` of
trkx.tracks.fit.field_map; signs by the turning sense) and ``[1, s]`` along (``z0``,
``cot(theta)``). The generalised least squares of each block gives

    C = (J^T V^-1 J)^-1,   chi2 = r^T (V^-1 - V^-1 J C J^T V^-1) r,   ndf = 2 n - 5,

the covariance of the parameters and the chi2 at the best linear correction of the fit. The
correction is taken for ``d0``, ``phi`` (with the curvature held), ``z0`` and ``cot(theta)``:
on event 21001 it narrows the z0 residuals of prompt tracks at |eta| < 1 from 0.66 to 0.045 mm
(the robust fit's line weighs a long strip's z as a pixel's), d0 from 0.12 to 0.046 mm, phi
from 2.0 to 1.2 mrad and eta 3x. The curvature keeps the robust fit's value (pT, charge),
which a wrong hit cannot bend: its correction widened the pT residuals there (0.013 -> 0.016
at |eta| < 1). Reported: ``chi2_ndf`` (median 1.0 on 21001's matched tracks, 150 before the
scattering was counted) and the one-sigma errors ``pt_err = pT sqrt(var(kappa)) / kappa``,
``eta_err = sqrt(C_cc) / cosh(eta)``, ``phi_err``, ``d0_err``, ``z0_err``. The curvature's
variance is that of the value reported, the robust fit's, which weighs the hits by their
resolution alone: ``a^T V a`` for its linear weights ``a`` (trkx.tracks.fit.gls_kernels), not
the GLS's ``C_kk``, which it exceeds where the scattering dominates (event 21001's pT pull at
|eta| 2-3 2.67 -> 1.93, at 0-1 1.34 -> 1.18).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from trkx.data.detector import VOLUME_GROUP
from trkx.data.simulate.physics import highland_angle
from trkx.runtime.device import numba_importable
from trkx.tracks.fit.field_map import lacking_bend
from trkx.tracks.fit.helix_fit import BARREL_VOLUMES, HelixFit, hit_resolutions

#: ``x / X0`` at normal incidence from a crossing of one volume group to the next crossing on
#: another layer (groups: trkx.data.detector.VOLUME_GROUP; measured on the real sample
#: event, pairs of 5-188, widths to ~10-30%); a pair not listed takes the crossing's own
#: group's ``(g, g)``.
MATERIAL_BETWEEN_LAYERS: dict[tuple[int, int], float] = {
    (7, 7): 0.0105, (7, 12): 0.060, (7, 13): 0.019, (8, 7): 0.0082, (8, 8): 0.0101,
    (8, 13): 0.042, (12, 12): 0.18, (12, 16): 0.13, (13, 12): 0.018, (13, 13): 0.019,
    (13, 16): 0.059, (13, 17): 0.015, (16, 16): 0.11, (17, 17): 0.033}
#: ``x / X0`` at normal incidence seen across the track where it differs (the azimuth's kicks,
#: less the field map's bend, over 1.4x as wide as the polar angle's: the strip disks; the
#: same event, ``x0_normal_across`` of benchmarks/results/material_sample.json); elsewhere
#: across is along.
MATERIAL_ACROSS: dict[tuple[int, int], float] = {
    (7, 12): 0.22, (12, 12): 0.38, (12, 16): 0.53, (13, 16): 0.13, (16, 16): 0.62}
#: ... and to the next crossing on the same layer (another module of it).
MATERIAL_WITHIN_LAYER: dict[int, float] = {7: 0.0065, 8: 0.0008, 12: 0.0024, 13: 0.0017,
                                           16: 0.015, 17: 0.0023}
#: The error columns of the parameters file, in order.
ERROR_COLUMNS: tuple[str, ...] = ("pt_err", "eta_err", "phi_err", "d0_err", "z0_err")


@dataclass(frozen=True, eq=False)
class CalibratedFit:
    """Per track (the order of ``track_id``): the helix after the generalised least squares'
    correction, the chi2 / ndf of the module docstring and the parameters' one-sigma errors
    (NaN for tracks of < 3 hits)."""

    track_id: np.ndarray
    pt: np.ndarray
    eta: np.ndarray
    phi: np.ndarray
    d0: np.ndarray
    z0: np.ndarray
    charge: np.ndarray
    chi2_ndf: np.ndarray
    pt_err: np.ndarray
    eta_err: np.ndarray
    phi_err: np.ndarray
    d0_err: np.ndarray
    z0_err: np.ndarray


def material_after(volume_id: np.ndarray, next_volume_id: np.ndarray,
                   same_layer: np.ndarray, across: bool = False) -> np.ndarray:
    """``x / X0`` at normal incidence from each crossing to the next (module docstring); with
    ``across``, as the scattering across the track sees it (:data:`MATERIAL_ACROSS`)."""
    group = _groups(volume_id)
    following = _groups(next_volume_id)
    table = {**MATERIAL_BETWEEN_LAYERS, **(MATERIAL_ACROSS if across else {})}
    material = np.zeros(len(group))
    for first in np.unique(group):
        mine = group == first
        material[mine] = table[(first, first)]
        for (a, b), value in table.items():
            if a == first:
                material[mine & (following == b)] = value
        material[mine & same_layer] = MATERIAL_WITHIN_LAYER[first]
    return material


def _groups(volume_id: np.ndarray) -> np.ndarray:
    volume_id = np.asarray(volume_id, dtype=np.int64)
    group = np.full(len(volume_id), 8, dtype=np.int64)     # anything else: as the pixel barrel
    for volume, value in VOLUME_GROUP.items():
        group[volume_id == volume] = value
    return group


def scattering_angles(volume_id: np.ndarray, next_volume_id: np.ndarray,
                      same_layer: np.ndarray, pt: np.ndarray, eta: np.ndarray,
                      across: bool = False) -> np.ndarray:
    """Highland's ``theta0`` (rad) from each crossing to the next (module docstring; with
    ``across``, the scattering across the track)."""
    sin_theta, cos_theta = 1.0 / np.cosh(eta), np.abs(np.tanh(eta))
    barrel = np.isin(np.asarray(volume_id, dtype=np.int64), BARREL_VOLUMES)
    incidence = np.maximum(np.where(barrel, sin_theta, cos_theta), 0.05)
    x_over_x0 = material_after(volume_id, next_volume_id, np.asarray(same_layer, dtype=bool),
                               across)
    momentum = pt * np.cosh(eta)
    ones = np.ones_like(momentum)
    return highland_angle(momentum, ones, ones, x_over_x0 / incidence)


def calibrated_fit(fit: HelixFit, track_id: np.ndarray, x: np.ndarray, y: np.ndarray,
                   z: np.ndarray, volume_id: np.ndarray, layer_id: np.ndarray,
                   field_map: str = "solenoid") -> CalibratedFit:
    """The module docstring's fit of every track of ``fit`` (fitted to the hits ``(x, y, z)``
    of ``track_id``, on the modules of ``volume_id``, ``layer_id``; in ``field_map`` the hits
    the last fit saw:
    trkx.tracks.fit.field_map.fitted_hits): one generalised least-squares step from it, the
    curvature held."""
    track_id = np.asarray(track_id, dtype=np.int64)
    n_tracks = len(fit.track_id)
    hits = np.flatnonzero(np.isin(track_id, fit.track_id[fit.n_hits >= 3]))
    row = np.searchsorted(fit.track_id, track_id[hits])
    xs, ys, zs = (np.asarray(a, dtype=np.float64)[hits] for a in (x, y, z))
    volumes = np.asarray(volume_id, dtype=np.int64)[hits]
    layers = volumes * 1000 + np.asarray(layer_id, dtype=np.int64)[hits]
    radius, phi, d0 = fit.radius[row], fit.phi[row], fit.d0[row]
    sense = -fit.charge[row].astype(np.float64)
    z0, eta, pt = fit.z0[row], fit.eta[row], fit.pt[row]
    cot = np.sinh(eta)
    tx, ty = np.cos(phi), np.sin(phi)
    px, py = -d0 * ty, d0 * tx
    cx, cy = px - sense * radius * ty, py + sense * radius * tx
    start = np.arctan2(py - cy, px - cx)
    s = sense * radius * np.angle(np.exp(1j * (np.arctan2(ys - cy, xs - cx) - start)))
    distance = np.hypot(xs - cx, ys - cy)
    fine, sigma_z, sigma_r = hit_resolutions(volumes)
    cos_beta = np.abs((xs * (xs - cx) + ys * (ys - cy))
                      / np.maximum(np.hypot(xs, ys) * distance, 1e-12))
    bend = (0.5 * s * s if field_map == "uniform"
            else 0.5 * s * s - lacking_bend(s, z0, cot))
    sin_theta = 1.0 / np.cosh(eta)
    order = np.lexsort((s, row))
    starts = np.searchsorted(row[order], np.arange(n_tracks + 1))
    theta0, theta0_across = np.empty(len(order)), np.empty(len(order))
    crossings = _next_crossings(row[order], volumes[order], layers[order])
    theta0[order] = scattering_angles(*crossings, pt[order], eta[order])
    theta0_across[order] = scattering_angles(*crossings, pt[order], eta[order], across=True)
    chi2, ndf, var, delta = _gls_per_track(starts, *(np.ascontiguousarray(a[order]) for a in (
        s, distance - radius, zs - z0 - s * cot, np.sqrt(fine ** 2 + (sigma_r * cos_beta) ** 2),
        np.sqrt(sigma_z ** 2 + (sigma_r * cot) ** 2 + 1e-6 ** 2), bend,
        theta0_across / sin_theta, theta0 / sin_theta ** 2, sense)))
    fitted = (fit.n_hits >= 3) & (ndf > 0)
    nan = np.where(fitted, 1.0, np.nan)
    kappa = 1.0 / fit.radius
    new_cot = np.sinh(fit.eta) + delta[:, 4]
    new_eta = np.arcsinh(new_cot)
    return CalibratedFit(
        track_id=fit.track_id, pt=fit.pt * nan, eta=new_eta * nan,
        phi=np.angle(np.exp(1j * (fit.phi + delta[:, 1]))) * nan,
        d0=(fit.d0 + delta[:, 0]) * nan, z0=(fit.z0 + delta[:, 3]) * nan,
        charge=fit.charge,
        chi2_ndf=chi2 / np.maximum(ndf, 1) * nan,
        pt_err=fit.pt * np.sqrt(var[:, 2]) / kappa * nan,
        eta_err=np.sqrt(var[:, 4]) / np.cosh(new_eta) * nan,
        phi_err=np.sqrt(var[:, 1]) * nan, d0_err=np.sqrt(var[:, 0]) * nan,
        z0_err=np.sqrt(var[:, 3]) * nan)


def _next_crossings(row: np.ndarray, volume: np.ndarray, layer: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """In path order (``row``: each hit's track, grouped): each hit's volume, the next hit's
    volume (its own for a track's last hit, whose scattering no hit sees) and whether the next
    hit is on the same layer."""
    last = np.append(row[1:] != row[:-1], True)[:len(row)]     # no hits: none
    following = np.append(volume[1:], 0)[:len(row)]
    following[last] = volume[last]
    same = np.append(layer[1:] == layer[:-1], False)[:len(row)] & ~last
    return volume, following, same


def _gls_track(t, starts, s, across, along, sigma_across, sigma_along, bend, angle_across,
               angle_along, sense, chi2, ndf, var, delta) -> None:
    """Track ``t`` of :func:`_gls_numpy`: its chi2, ndf, variances and corrections written into
    row ``t`` of the outputs."""
    lo, hi = starts[t], starts[t + 1]
    n = hi - lo
    if n < 3:
        return
    st = s[lo:hi]
    turn = sense[lo:hi]
    # measured minus predicted displacement: towards the centre across, along the beam
    blocks = ((-across[lo:hi], sigma_across[lo:hi], angle_across[lo:hi],
               np.stack((turn, turn * st, bend[lo:hi]), 1)),
              (along[lo:hi], sigma_along[lo:hi], angle_along[lo:hi],
               np.stack((np.ones(n), st), 1)))
    total, column = 0.0, 0
    for residual, sigma, angle, jacobian in blocks:
        lever = np.maximum(st.reshape(-1, 1) - st.reshape(1, -1), 0.0) * angle.reshape(1, -1)
        cov = lever @ lever.T + np.diag(sigma ** 2)
        weight_j = np.linalg.solve(cov, jacobian)
        weight_r = np.linalg.solve(cov, residual)
        c = np.linalg.inv(jacobian.T @ weight_j)
        correction = jacobian.T @ weight_r
        total += residual @ weight_r - correction @ (c @ correction)
        width = jacobian.shape[1]
        var[t, column:column + width] = np.diag(c)
        if column == 0 and np.isfinite(c[2, 2]):    # the robust fit's curvature: its own
            w = 1.0 / sigma ** 2                      # variance (trkx.tracks.fit.gls_kernels)
            a = (jacobian * w[:, None]) @ np.linalg.solve(jacobian.T @ (jacobian * w[:, None]),
                                                          np.eye(width)[2])
            var[t, 2] = a @ cov @ a
        # the correction: across with the curvature held (pT stays the robust fit's)
        held = np.ascontiguousarray(jacobian[:, :2])
        delta[t, column:column + 2] = np.linalg.solve(held.T @ np.linalg.solve(cov, held),
                                                      held.T @ weight_r)
        column += width
    chi2[t], ndf[t] = total, 2 * n - 5


def _gls_numpy(starts, s, across, along, sigma_across, sigma_along, bend, angle_across,
               angle_along, sense):
    """Per track ``(chi2, ndf, var, delta)`` (module docstring): ``var`` and ``delta`` [T, 5]
    the variances and the generalised least squares' corrections of ``(d0, phi, kappa, z0,
    cot)`` (the curvature's correction 0: held); the hits of track ``t`` are
    ``starts[t]:starts[t + 1]``, in path order. The reference loop of :func:`_gls_per_track`."""
    n_tracks = len(starts) - 1
    chi2, ndf = np.zeros(n_tracks), np.zeros(n_tracks)
    var, delta = np.full((n_tracks, 5), np.nan), np.zeros((n_tracks, 5))
    for t in range(n_tracks):
        _gls_track(t, starts, s, across, along, sigma_across, sigma_along, bend, angle_across,
                   angle_along, sense, chi2, ndf, var, delta)
    return chi2, ndf, var, delta


if numba_importable():
    from trkx.tracks.fit.gls_kernels import gls_per_track as _gls_per_track
else:  # pragma: no cover - numba is a dependency; the numpy loop is its reference
    _gls_per_track = _gls_numpy
