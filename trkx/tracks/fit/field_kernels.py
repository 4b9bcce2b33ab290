"""The fit in the solenoid's field, compiled: every track's fits in one pass of its own.

:func:`fit_tracks_in_field` computes, per track, what ``field_map._fit_in_field_numpy`` computes
with numpy arrays over the still active tracks at each iteration (the math is in
trkx.tracks.fit.field_map's docstring): the uniform helix fit
(trkx.tracks.fit.helix_kernels.fit_track), then, while the pT moved by more than
``tolerance`` (relative) and at most ``max_iterations`` times, the original hits moved towards
the circle's centre by

    D(s) = (s^2 / 2 - G(s)) / R,    G(s) = int_0^s (s - u) b(z0 + u cot(theta)) du

(``G`` by Gauss-Legendre quadrature at ``nodes`` / ``weights``; ``b(z) = (1 + exp(-h / w)) /
(1 + exp((|z| - h) / w))``) and fitted again; last, the hits moved by the final parameters,
which the calibrated fit reads (field_map.fitted_hits). A track's iterations depend on its
own hits only, so running each track to its end gives the numpy loop's iterations: the
numpy version spent more time in its per-iteration gathers (``np.isin``, ``searchsorted``,
the [hits, 16] quadrature temporaries) than in the fits. Sums follow each loop's order, not
numpy's pairwise order, so the parameters can differ from the numpy version's in their last
digits (tests compare them).
"""

from __future__ import annotations

import math

import numba
import numpy as np

from trkx.tracks.fit.helix_kernels import fit_setup, fit_track

njit = numba.njit(cache=True, nogil=True, fastmath=False, error_model="numpy")


@njit
def lacking_bend_at(s: float, z0: float, cot: float, nodes: np.ndarray, weights: np.ndarray,
                    half_length: float, edge_width: float) -> float:
    """``s^2 / 2 - G(s)`` at one path length ``s`` (module docstring)."""
    near = 1.0 + math.exp(-half_length / edge_width)
    total = 0.0
    for k in range(nodes.shape[0]):
        u = 0.5 * s * (nodes[k] + 1.0)
        field = near / (1.0 + math.exp((abs(z0 + u * cot) - half_length) / edge_width))
        total += (s - u) * (1.0 - field) * weights[k]
    return 0.5 * s * total


@njit
def _move_hits(hits: np.ndarray, x: np.ndarray, y: np.ndarray, row: np.ndarray,
               nodes: np.ndarray, weights: np.ndarray, half_length: float, edge_width: float,
               moved_x: np.ndarray, moved_y: np.ndarray, moved_radius: np.ndarray) -> None:
    """The track's hits moved towards the centre of the circle of ``row`` (helix_kernels.OUTPUTS) by
    ``D(s)`` into ``moved_x``, ``moved_y`` and their radii into ``moved_radius``; a hit whose
    shift is not finite stays (field_map._toward_centres)."""
    radius, sense, d0, phi, z0 = row[0], row[1], row[2], row[3], row[4]
    cot = math.sinh(math.asinh(row[5]))        # the numpy loop reads it back from eta
    tx, ty = math.cos(phi), math.sin(phi)
    px, py = -d0 * ty, d0 * tx
    cx, cy = px - sense * radius * ty, py + sense * radius * tx
    start = math.atan2(py - cy, px - cx)
    for i in hits:
        turn = math.atan2(y[i] - cy, x[i] - cx) - start
        s = sense * radius * math.atan2(math.sin(turn), math.cos(turn))
        distance = math.hypot(x[i] - cx, y[i] - cy)
        bend = lacking_bend_at(s, z0, cot, nodes, weights, half_length, edge_width)
        scale = (distance - bend / radius) / (distance if distance > 0 else 1.0)
        if math.isfinite(scale) and distance > 0:
            moved_x[i], moved_y[i] = cx + (x[i] - cx) * scale, cy + (y[i] - cy) * scale
        else:
            moved_x[i], moved_y[i] = x[i], y[i]
        moved_radius[i] = max(math.hypot(moved_x[i], moved_y[i]), 1e-12)


@numba.njit(cache=True, nogil=True, parallel=True, fastmath=False, error_model="numpy")
def fit_tracks_in_field(inverse: np.ndarray, n_tracks: int, x: np.ndarray, y: np.ndarray,
                        z: np.ndarray, sigma_fine: np.ndarray, sigma_z: np.ndarray,
                        sigma_r: np.ndarray, steps: int, pixel_sigma2: float,
                        outlier_scale: float, max_radius: float, pt_scale: float,
                        tolerance: float, max_iterations: int, nodes: np.ndarray,
                        weights: np.ndarray, half_length: float, edge_width: float,
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per track (``inverse``: each hit's track 0..n_tracks-1) its hit count, the rows of
    helix_kernels.OUTPUTS ``[9, n_tracks]`` of its last fit (module docstring), and each hit
    moved by its track's final parameters (``x``, ``y`` for tracks that were not fitted);
    ``pt_scale = PT_PER_TESLA_MM |B|``."""
    order, starts, counts, out, u, v, by_radius, hit_radius, fitted = fit_setup(
        inverse, n_tracks, x, y)   # tracks of < 3 hits: NaN parameters, the hits where they are
    moved_x, moved_y, moved_radius = x.copy(), y.copy(), hit_radius.copy()
    for k in numba.prange(fitted.shape[0]):
        t = fitted[k]
        hits = order[starts[t]:starts[t + 1]]
        row, ordered, work = out[:, t], by_radius[starts[t]:starts[t + 1]], np.empty((5, 3, 3))
        fit_track(hits, x, y, z, hit_radius, sigma_fine, sigma_z, sigma_r, u, v, ordered,
                  work, steps, pixel_sigma2, outlier_scale, max_radius, row)
        active = math.isfinite(pt_scale * row[0])
        for _ in range(max_iterations):
            if not active:
                break
            before = pt_scale * row[0]
            _move_hits(hits, x, y, row, nodes, weights, half_length, edge_width, moved_x,
                       moved_y, moved_radius)
            fit_track(hits, moved_x, moved_y, z, moved_radius, sigma_fine, sigma_z, sigma_r,
                      u, v, ordered, work, steps, pixel_sigma2, outlier_scale, max_radius,
                      row)
            active = abs(pt_scale * row[0] / before - 1.0) > tolerance
        if math.isfinite(pt_scale * row[0]):
            _move_hits(hits, x, y, row, nodes, weights, half_length, edge_width, moved_x,
                       moved_y, moved_radius)
        else:
            for i in hits:
                moved_x[i], moved_y[i] = x[i], y[i]
    return counts, out, moved_x, moved_y
