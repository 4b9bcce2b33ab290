"""Track parameters in the field the detector has: the solenoid's fall-off along the beam.

The TrackML field is a solenoid: ``Bz`` is 2 T at the centre and falls off along the beam,

    Bz(z) = B0 b(z),   b(z) = (1 + exp(-h / w)) / (1 + exp((|z| - h) / w)),

with ``h`` = 1924 mm and ``w`` = 381 mm (trkx.data.simulate.physics; measured on the real sample
event's truth momenta: 1.99 / 1.93 / 1.74 / 0.96 T at |z| ~ 250 / 750 / 1250 / 1950 mm). A
helix fit that assumes ``B0`` everywhere (trkx.tracks.fit.helix_fit) sees forward tracks bend
less than ``B0`` bends them and overestimates their pT (by 16% at |eta| 2-3 on real events).

With only ``Bz``, ``pz`` and pT are conserved, so ``z = z0 + s cot(theta)`` along the transverse
path ``s`` and the track's curvature is ``kappa(s) = kappa0 b(z(s))``, ``kappa0 = 1 / R0`` the
curvature ``B0`` would give (``pT = 0.3 B0 R0``). To first order in the deviation, the
trajectory lies outside the circle of curvature ``kappa0`` through the same perigee by

    D(s) = kappa0 (s^2 / 2 - G(s)),   G(s) = int_0^s (s - u) b(z0 + u cot(theta)) du

(the double integral of the curvature it lacks; ``G = s^2 / 2`` when ``b = 1``).
:func:`fit_in_field` therefore fits the uniform helix, moves each hit towards its circle's
centre by ``D(s_i)`` (``G`` by Gauss-Legendre quadrature) and fits again, until the pT settles
(the correction shrinks ~3x per fit): the circle then is that of ``kappa0``, so the pT,
charge, phi, d0 and eta reported are those at the perigee, in the field there, and chi2 the
residuals from the field's trajectory. Along the tangent the trajectory and the circle part
only at second order: z0 moves by < 1 mm on forward tracks. On event 21001 the median
fitted / true pT - 1 at |eta| 0-1 / 1-2 / 2-3 / 3-4 goes from -0.002 / +0.025 / +0.164 / +0.133
to -0.008 / -0.004 / -0.021 / -0.004, and the d0 / phi widths at |eta| 2-3 from 0.39 mm / 9.0 mrad
to 0.18 mm / 4.1 mrad (docs/design.md, "Track parameters in the field map").
"""

from __future__ import annotations

from dataclasses import fields

import numpy as np

from trkx.data.simulate.physics import FIELD_MAPS, SOLENOID_EDGE_WIDTH, SOLENOID_HALF_LENGTH
from trkx.tracks.fit import helix_fit
from trkx.tracks.fit.helix_fit import (
    FIELD_TESLA,
    PT_PER_TESLA_MM,
    HelixFit,
    fit_helices,
    fit_inputs,
    helix_fit_from_rows,
)

#: A track's fits repeat until its pT moves by less than this (relative; 10x below the
#: resolution) ...
FIELD_TOLERANCE = 1e-3
#: ... or this many times (the correction shrinks ~3x per fit: 0.2 -> 0.05 -> 0.01 -> 0.003
#: of pT for a track at |eta| 2.4).
FIELD_MAX_ITERATIONS = 10
_NODES, _WEIGHTS = np.polynomial.legendre.leggauss(16)


def check_field_map(field_map: str) -> str:
    """``field_map`` when it is one of the simulator's maps (``uniform``: B0 everywhere;
    ``solenoid``: the module docstring's), else a ValueError naming it."""
    if field_map not in FIELD_MAPS:
        raise ValueError(f"field_map {field_map!r} is not one of {', '.join(FIELD_MAPS)}")
    return field_map


def relative_field(z: np.ndarray) -> np.ndarray:
    """``b(z) = Bz(z) / B0`` of the solenoid (module docstring), z in mm."""
    h, w = SOLENOID_HALF_LENGTH, SOLENOID_EDGE_WIDTH
    return (1.0 + np.exp(-h / w)) / (1.0 + np.exp((np.abs(z) - h) / w))


def lacking_bend(s: np.ndarray, z0: np.ndarray, cot: np.ndarray) -> np.ndarray:
    """``s^2 / 2 - G(s)`` per hit (module docstring): the double integral of ``1 - b`` along
    the path, 16-point Gauss-Legendre over ``u`` in ``[0, s]``."""
    s = s[:, None]
    u = 0.5 * s * (_NODES[None, :] + 1.0)
    lacking = (s - u) * (1.0 - relative_field(z0[:, None] + u * cot[:, None]))
    return 0.5 * s[:, 0] * (lacking * _WEIGHTS[None, :]).sum(axis=1)


def fit_in_field(track_id: np.ndarray, x: np.ndarray, y: np.ndarray, z: np.ndarray,
                 volume_id: np.ndarray | None = None, field_map: str = "solenoid",
                 field: float = FIELD_TESLA, tolerance: float = FIELD_TOLERANCE,
                 max_iterations: int = FIELD_MAX_ITERATIONS) -> HelixFit:
    """:func:`trkx.tracks.fit.helix_fit.fit_helices` in ``field_map`` (``uniform``: that fit
    itself), ``field`` the field at the centre (T). The module docstring's fits are repeated
    for the tracks whose pT still moved by more than ``tolerance`` (relative), at most
    ``max_iterations`` times; each fit shifts the original hits by the last parameters."""
    return fit_in_field_with_hits(track_id, x, y, z, volume_id, field_map, field, tolerance,
                                  max_iterations)[0]


def fit_in_field_with_hits(track_id: np.ndarray, x: np.ndarray, y: np.ndarray, z: np.ndarray,
                           volume_id: np.ndarray | None = None, field_map: str = "solenoid",
                           field: float = FIELD_TESLA, tolerance: float = FIELD_TOLERANCE,
                           max_iterations: int = FIELD_MAX_ITERATIONS,
                           ) -> tuple[HelixFit, np.ndarray, np.ndarray]:
    """:func:`fit_in_field`, and the transverse hit positions its last fit saw
    (:func:`fitted_hits`): compiled per track (trkx.tracks.fit.field_kernels) where the helix
    fit is (helix_fit.COMPILED_FIT), else the numpy loop over the active tracks."""
    check_field_map(field_map)
    if field_map == "uniform":
        fit = fit_helices(track_id, x, y, z, volume_id, field)
        return fit, *fitted_hits(fit, track_id, x, y, z, field_map, field)
    if not helix_fit.COMPILED_FIT:
        fit = _fit_in_field_numpy(track_id, x, y, z, volume_id, field, tolerance,
                                  max_iterations)
        return fit, *fitted_hits(fit, track_id, x, y, z, field_map, field)
    from trkx.tracks.fit.field_kernels import fit_tracks_in_field

    inputs = fit_inputs(track_id, x, y, z, volume_id)
    counts, rows, moved_x, moved_y = fit_tracks_in_field(
        *inputs.kernel_arguments(), abs(field) * PT_PER_TESLA_MM, tolerance, max_iterations,
        _NODES, _WEIGHTS, SOLENOID_HALF_LENGTH, SOLENOID_EDGE_WIDTH)
    all_x, all_y = np.array(x, dtype=np.float64), np.array(y, dtype=np.float64)
    all_x[inputs.used], all_y[inputs.used] = moved_x, moved_y
    return helix_fit_from_rows(inputs.ids, counts, rows, field), all_x, all_y


def _fit_in_field_numpy(track_id: np.ndarray, x: np.ndarray, y: np.ndarray, z: np.ndarray,
                        volume_id: np.ndarray | None, field: float, tolerance: float,
                        max_iterations: int) -> HelixFit:
    """:func:`fit_in_field` in the solenoid with numpy arrays over the tracks still active at
    each iteration (the reference of the compiled fit)."""
    fit = fit_helices(track_id, x, y, z, volume_id, field)
    track_id = np.asarray(track_id, dtype=np.int64)
    x, y, z = (np.asarray(a, dtype=np.float64) for a in (x, y, z))
    result = {f.name: getattr(fit, f.name).copy() for f in fields(HelixFit)}
    active = fit.track_id[np.isfinite(fit.pt)]
    sign = np.sign(field if field != 0 else 1.0)
    for _ in range(max_iterations):
        hits = np.flatnonzero(np.isin(track_id, active))
        if len(hits) == 0:
            break
        row = np.searchsorted(result["track_id"], track_id[hits])
        moved_x, moved_y = _toward_centres(
            x[hits], y[hits], result["radius"][row], result["phi"][row], result["d0"][row],
            -result["charge"][row] * sign, result["z0"][row], np.sinh(result["eta"][row]))
        step = fit_helices(track_id[hits], moved_x, moved_y, z[hits],
                           None if volume_id is None else np.asarray(volume_id)[hits], field)
        rows = np.searchsorted(result["track_id"], step.track_id)
        moved = np.abs(step.pt / result["pt"][rows] - 1.0)
        for name, values in result.items():
            values[rows] = getattr(step, name)
        active = step.track_id[moved > tolerance]
    return HelixFit(**result)


def _toward_centres(x: np.ndarray, y: np.ndarray, radius: np.ndarray, phi: np.ndarray,
                    d0: np.ndarray, sense: np.ndarray, z0: np.ndarray, cot: np.ndarray,
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Each hit moved towards its track's circle centre by ``D(s)`` (module docstring), the
    circle and line of the track's parameters (perigee ``d0`` at direction ``phi``, turning
    ``sense``); hits whose shift is not finite stay."""
    tx, ty = np.cos(phi), np.sin(phi)
    px, py = -d0 * ty, d0 * tx                                    # the perigee
    cx, cy = px - sense * radius * ty, py + sense * radius * tx   # the circle's centre
    start = np.arctan2(py - cy, px - cx)
    s = sense * radius * np.angle(np.exp(1j * (np.arctan2(y - cy, x - cx) - start)))
    distance = np.hypot(x - cx, y - cy)
    scale = (distance - lacking_bend(s, z0, cot) / radius) / np.where(distance > 0, distance,
                                                                        1.0)
    moved_x, moved_y = cx + (x - cx) * scale, cy + (y - cy) * scale
    keep = ~(np.isfinite(scale) & (distance > 0))
    moved_x[keep], moved_y[keep] = x[keep], y[keep]
    return moved_x, moved_y


def fitted_hits(fit: HelixFit, track_id: np.ndarray, x: np.ndarray, y: np.ndarray,
                z: np.ndarray, field_map: str = "solenoid", field: float = FIELD_TESLA,
                ) -> tuple[np.ndarray, np.ndarray]:
    """The transverse hit positions the fit in ``field_map`` sees for its final parameters:
    each hit of a fitted track moved towards its circle's centre by ``D(s)``; ``(x, y)``
    themselves for ``uniform``."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if check_field_map(field_map) == "uniform":
        return x, y
    track_id = np.asarray(track_id, dtype=np.int64)
    hits = np.flatnonzero(np.isin(track_id, fit.track_id[np.isfinite(fit.pt)]))
    row = np.searchsorted(fit.track_id, track_id[hits])
    moved_x, moved_y = x.copy(), y.copy()
    moved_x[hits], moved_y[hits] = _toward_centres(
        x[hits], y[hits], fit.radius[row], fit.phi[row], fit.d0[row],
        -fit.charge[row] * np.sign(field if field != 0 else 1.0), fit.z0[row],
        np.sinh(fit.eta[row]))
    return moved_x, moved_y

