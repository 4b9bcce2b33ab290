"""The helix fit of every track, compiled: ``helix_fit.fit_helices`` in one pass per track.

:func:`fit_tracks` computes, per track, what ``helix_fit._fit_helices_numpy`` computes with
numpy arrays over all tracks at once (the math is in trkx.tracks.fit.helix_fit's docstring):
the algebraic circle on centred coordinates, its two starts (algebraic, and the circle through
the innermost, middle and outermost hits) each refined by the weighted Gauss-Newton steps
(trkx.tracks.fit.circle_kernels), the start of smaller robust loss, the straight line when its
loss is smaller still, the turning sense, the closest approach and the line ``z = z0 + s
cot(theta)`` with the chi2 sums. Every sum runs over the track's hits in their original order,
as ``np.bincount`` does; the 3x3 solves are Gaussian elimination, not LAPACK's code, a hit's
distance to the centre is ``sqrt(du^2 + dv^2)`` (numpy's ``hypot`` guards against overflow
that mm-scale coordinates cannot reach, at twice the cost), its reciprocal is taken once per
hit and step, and each hit's path length once per fit: 1.9x faster per hit than the
operation-for-operation port (46 -> 24 ms for event 21001's 3,851 tracks, one thread). A fit
therefore differs from the numpy version's in its last digits, and the six robust steps carry
that furthest on ill-conditioned (the stiffest) tracks: 1 of the sample event's 225 tracks
moves by 8e-5 / GeV in curvature (tests/test_fast_paths_on_sample_event.py; the tests compare
both fits and the builders' tracks).

Tracks are independent: the threads share them (``prange``), so the result does not depend on
the thread count. A track of < 3 hits is not fitted (its row stays NaN): most of an event's ids
are lone hits, and fitting them cost more than the tracks' own fits. On event 21001 the builder
fits ~20 times (track tables, the swap, the extension rounds, the second pass), and the
parameters' fit in the field map once per track and iteration (trkx.tracks.fit.field_kernels);
the numpy version spent 0.6 s there, mostly in temporaries.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from trkx.tracks.fit.circle_kernels import (
    circle_steps,
    floor_max,
    group_by_track,
    hit_radii,
    solve3,
    tracks_to_fit,
)

njit = numba.njit(cache=True, nogil=True, fastmath=False, error_model="numpy")
#: Per-track outputs of :func:`fit_tracks`, the rows of its result.
OUTPUTS = ("radius", "sense", "d0", "phi", "z0", "cot", "chi2", "sq_xy", "sq_z")


@njit
def remainder(a: float, b: float) -> float:
    """``a % b`` as numpy computes it for floats (the sign of ``b``)."""
    mod = np.fmod(a, b)
    if mod != 0.0:
        if (b < 0) != (mod < 0):
            mod += b
    else:
        mod = math.copysign(0.0, b)
    return mod


@njit
def _by_radius(hits: np.ndarray, hit_radius: np.ndarray, out: np.ndarray) -> None:
    """``out`` = the track's hits sorted by transverse radius (``hit_radius``), ties in their
    original order (stable)."""
    out[:] = hits
    for k in range(1, out.shape[0]):
        i = out[k]
        key = hit_radius[i]
        j = k - 1
        while j >= 0 and hit_radius[out[j]] > key:
            out[j + 1] = out[j]
            j -= 1
        out[j + 1] = i


@njit
def _robust_loss(hits, u, v, x, y, hit_radius, sigma_fine, sigma_r, a, b, radius,
                 pixel_sigma2, outlier_scale) -> float:
    """``sum_i (sigma_0 / sigma_i)^2 log(1 + (e_i / c)^2)`` over the track's hits."""
    total = 0.0
    for k in range(hits.shape[0]):
        i = hits[k]
        du, dv = u[i] - a, v[i] - b
        length = math.sqrt(du * du + dv * dv)
        res = length - radius
        dist = floor_max(length, 1e-12)
        cos_beta = (du * x[i] + dv * y[i]) / (dist * hit_radius[i])
        coarse = sigma_r[i] * cos_beta
        sigma2 = sigma_fine[i] * sigma_fine[i] + coarse * coarse
        weight = (pixel_sigma2 / sigma2) / (1.0 + 0.0)
        scaled = res / outlier_scale
        total += weight * math.log1p(scaled * scaled)
    return total


@njit
def _three_point_start(ordered, u, v, max_radius) -> tuple[float, float, float]:
    """The circle through the innermost, middle and outermost hits (``ordered`` by radius);
    ``(0, max_radius, max_radius)`` where they are on a line or the track has < 3 hits."""
    n = ordered.shape[0]
    i1, i2, i3 = ordered[0], ordered[(n - 1) // 2], ordered[n - 1]
    u1, v1, u2, v2, u3, v3 = u[i1], v[i1], u[i2], v[i2], u[i3], v[i3]
    det = 2.0 * (u1 * (v2 - v3) + u2 * (v3 - v1) + u3 * (v1 - v2))
    q1, q2, q3 = u1 * u1 + v1 * v1, u2 * u2 + v2 * v2, u3 * u3 + v3 * v3
    a = (q1 * (v2 - v3) + q2 * (v3 - v1) + q3 * (v1 - v2)) / det
    b = (q1 * (u3 - u2) + q2 * (u1 - u3) + q3 * (u2 - u1)) / det
    radius = math.hypot(u1 - a, v1 - b)
    if math.isfinite(radius) and radius <= max_radius and n >= 3:
        return a, b, radius
    return 0.0, max_radius, max_radius


@njit
def fit_track(hits: np.ndarray, x: np.ndarray, y: np.ndarray, z: np.ndarray,
              hit_radius: np.ndarray, sigma_fine: np.ndarray, sigma_z: np.ndarray,
              sigma_r: np.ndarray, u: np.ndarray, v: np.ndarray, ordered: np.ndarray,
              work: np.ndarray, steps: int, pixel_sigma2: float, outlier_scale: float,
              max_radius: float, row: np.ndarray) -> None:
    """The fit of one track of >= 3 hits (``hits``, in their original order; module
    docstring) written into ``row`` (:data:`OUTPUTS`). ``u``, ``v`` (per hit of the arrays)
    are scratch at the track's hits, ``ordered`` (as long as ``hits``) its hits by radius,
    ``work`` [5, 3, 3] every 3x3 solve's: the track allocates nothing."""
    n = float(hits.shape[0])
    nn = n
    fitted = True                     # n >= 3 here (circle_steps takes the flag)
    # 1. circle: the algebraic fit on centred coordinates
    sx = sy = 0.0
    for i in hits:
        sx += x[i]
        sy += y[i]
    mx, my = sx / nn, sy / nn
    suu = svv = suv = suw = svw = sw = 0.0
    for i in hits:
        u[i], v[i] = x[i] - mx, y[i] - my
        w = u[i] * u[i] + v[i] * v[i]
        suu += u[i] * u[i]
        svv += v[i] * v[i]
        suv += u[i] * v[i]
        suw += u[i] * w
        svw += v[i] * w
        sw += w
    m, rhs, solution = work[4], work[3, 0], work[3, 1]
    m[:] = 0.0
    m[0, 0], m[0, 1], m[1, 0], m[1, 1], m[2, 2] = suu, suv, suv, svv, n
    rhs[0], rhs[1], rhs[2] = -suw, -svw, -sw
    solve3(m, rhs, solution, work[1], work[3, 2])
    a, b = -0.5 * solution[0], -0.5 * solution[1]
    radius = math.sqrt(floor_max(a * a + b * b - solution[2], 0.0))
    angle = 0.5 * math.atan2(2 * suv, suu - svv)
    far_a, far_b = -math.sin(angle) * max_radius, math.cos(angle) * max_radius
    if not (math.isfinite(a) and math.isfinite(b) and math.isfinite(radius)
            and radius <= max_radius):
        a, b, radius = far_a, far_b, max_radius
    # the two starts refined, the one of smaller robust loss kept
    _by_radius(hits, hit_radius, ordered)
    hit_arrays = (u, v, x, y, hit_radius, sigma_fine, sigma_r)
    a1, b1, r1 = circle_steps(hits, *hit_arrays, a, b, radius, fitted, steps, pixel_sigma2,
                              outlier_scale, max_radius, work)
    a2, b2, r2 = _three_point_start(ordered, u, v, max_radius)
    a2, b2, r2 = circle_steps(hits, *hit_arrays, a2, b2, r2, fitted, steps, pixel_sigma2,
                              outlier_scale, max_radius, work)
    loss1 = _robust_loss(hits, *hit_arrays, a1, b1, r1, pixel_sigma2, outlier_scale)
    loss2 = _robust_loss(hits, *hit_arrays, a2, b2, r2, pixel_sigma2, outlier_scale)
    a, b, radius, loss = (a2, b2, r2, loss2) if loss2 < loss1 else (a1, b1, r1, loss1)
    # a nearly straight track: the line through the hits' principal direction
    if _robust_loss(hits, *hit_arrays, far_a, far_b, max_radius, pixel_sigma2,
                    outlier_scale) < loss:
        a, b, radius = far_a, far_b, max_radius
    a, b = a + mx, b + my
    # turning sense from the innermost to the outermost hit
    first, last = ordered[0], ordered[ordered.shape[0] - 1]
    cross = (x[first] - a) * (y[last] - b) - (y[first] - b) * (x[last] - a)
    sense = 1.0 if cross >= 0 else -1.0
    # closest approach to the beam line and the direction there
    centre = math.hypot(a, b)
    scale = 1.0 - radius / floor_max(centre, 1e-12)
    p0x, p0y = a * scale, b * scale
    tx, ty = -sense * (p0y - b) / radius, sense * (p0x - a) / radius
    alpha0 = math.atan2(p0y - b, p0x - a)
    # 2. the line z = z0 + s cot(theta) on the path length from the closest approach
    ss = sz = s1 = z1 = 0.0
    for i in hits:
        turn = math.atan2(y[i] - b, x[i] - a) - alpha0
        turn = remainder(turn + np.pi, 2 * np.pi) - np.pi
        s = sense * radius * turn
        u[i] = s                    # u is free after the circle: the path length, kept
        ss += s * s
        sz += s * z[i]
        s1 += s
        z1 += z[i]
    denominator = n * ss - s1 * s1
    flat = abs(denominator) <= 1e-12 * floor_max(n * ss, 1e-300)
    cot = 0.0 if flat else (n * sz - s1 * z1) / denominator
    z0 = (z1 - cot * s1) / nn
    chi2 = sq_xy = sq_z = 0.0
    for i in hits:
        du, dv = x[i] - a, y[i] - b
        res_xy = math.sqrt(du * du + dv * dv) - radius
        res_z = z[i] - z0 - cot * u[i]
        sigma_zz = math.sqrt(sigma_z[i] * sigma_z[i] + (sigma_r[i] * cot) * (sigma_r[i] * cot)
                             + 1e-6 ** 2)
        chi2 += (res_xy / sigma_fine[i]) ** 2 + (res_z / sigma_zz) ** 2
        sq_xy += res_xy * res_xy
        sq_z += res_z * res_z
    row[0], row[1], row[2] = radius, sense, tx * p0y - ty * p0x
    row[3], row[4], row[5] = math.atan2(ty, tx), z0, cot
    row[6], row[7], row[8] = chi2, sq_xy, sq_z


@njit
def fit_setup(inverse: np.ndarray, n_tracks: int, x: np.ndarray, y: np.ndarray):
    """What a fit of every track prepares: ``(order, starts)`` (:func:`group_by_track`), the
    hit counts, the [9, n_tracks] rows (NaN: a track of < 3 hits keeps them,
    helix_fit._helix_fit), the scratch ``u``, ``v`` and by-radius order, the hit radii and the
    tracks to fit (:func:`tracks_to_fit`)."""
    order, starts = group_by_track(inverse, n_tracks)
    counts = np.zeros(n_tracks)
    for t in range(n_tracks):
        counts[t] = starts[t + 1] - starts[t]
    out = np.full((len(OUTPUTS), n_tracks), np.nan)
    return (order, starts, counts, out, np.empty_like(x), np.empty_like(y),
            np.empty_like(order), hit_radii(x, y), tracks_to_fit(starts))


@numba.njit(cache=True, nogil=True, parallel=True, fastmath=False, error_model="numpy")
def fit_tracks(inverse: np.ndarray, n_tracks: int, x: np.ndarray, y: np.ndarray,
               z: np.ndarray, sigma_fine: np.ndarray, sigma_z: np.ndarray,
               sigma_r: np.ndarray, steps: int, pixel_sigma2: float, outlier_scale: float,
               max_radius: float) -> tuple[np.ndarray, np.ndarray]:
    """Per track (``inverse``: each hit's track 0..n_tracks-1): its hit count and the rows of
    :data:`OUTPUTS` ``[9, n_tracks]`` (module docstring)."""
    order, starts, counts, out, u, v, by_radius, hit_radius, fitted = fit_setup(
        inverse, n_tracks, x, y)
    for k in numba.prange(fitted.shape[0]):
        t = fitted[k]
        hits = order[starts[t]:starts[t + 1]]
        fit_track(hits, x, y, z, hit_radius, sigma_fine, sigma_z, sigma_r, u, v,
                  by_radius[starts[t]:starts[t + 1]], np.empty((5, 3, 3)), steps,
                  pixel_sigma2, outlier_scale, max_radius, out[:, t])
    return counts, out
