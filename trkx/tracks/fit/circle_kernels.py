"""The weighted Gauss-Newton steps of the circle fit, compiled (trkx.tracks.fit.helix_kernels).

:func:`circle_steps` does for one track what ``helix_fit._weighted_circle`` does for all with
numpy arrays, without their temporaries: per step one pass over its hits accumulates its nine
sums (in hit order, as ``np.bincount`` does), then its 3x3 normal equations

    [[S_uu, S_uv, -S_u], [S_uv, S_vv, -S_v], [-S_u, -S_v, S_1]] (da, db, dR) = -(R_u, R_v, -R_1)

are solved by Gaussian elimination with partial pivoting (a system whose pivots multiply to
|det| <= 1e-300 is singular, as there). The per-hit arithmetic is the numpy version's, operation
for operation; the solve is LAPACK's algorithm but not its code, so a step can differ in its
last bits (the tests compare both fits and the builders' tracks).
"""

from __future__ import annotations

import math

import numba
import numpy as np

njit = numba.njit(cache=True, nogil=True, fastmath=False)
#: The largest finite float64 (what ``np.nan_to_num`` puts for an infinity).
_LARGEST = 1.7976931348623157e308


@njit
def floor_max(value: float, floor: float) -> float:
    """``np.maximum(value, floor)``: NaN stays NaN."""
    return value if (value >= floor or value != value) else floor


@njit
def solve3(m: np.ndarray, rhs: np.ndarray, out: np.ndarray, a: np.ndarray,
           b: np.ndarray) -> None:
    """``out = m^-1 rhs`` for a 3x3 ``m``, NaN when ``|det m| <= 1e-300``; ``a`` [3, 3] and
    ``b`` [3] are scratch (the elimination works on copies of ``m`` and ``rhs`` there, so a
    track's steps allocate nothing)."""
    for r in range(3):
        b[r] = rhs[r]
        for c in range(3):
            a[r, c] = m[r, c]
    det = 1.0
    for k in range(3):
        pivot = k
        for r in range(k + 1, 3):
            if abs(a[r, k]) > abs(a[pivot, k]):
                pivot = r
        if pivot != k:
            det = -det
            for c in range(3):
                a[k, c], a[pivot, c] = a[pivot, c], a[k, c]
            b[k], b[pivot] = b[pivot], b[k]
        det *= a[k, k]
        if a[k, k] == 0.0:
            continue
        for r in range(k + 1, 3):
            factor = a[r, k] / a[k, k]
            for c in range(k, 3):
                a[r, c] -= factor * a[k, c]
            b[r] -= factor * b[k]
    if not abs(det) > 1e-300:
        out[:] = np.nan
        return
    for k in range(2, -1, -1):
        total = b[k]
        for c in range(k + 1, 3):
            total -= a[k, c] * out[c]
        out[k] = total / a[k, k]


@njit
def group_by_track(inverse: np.ndarray, n_tracks: int) -> tuple[np.ndarray, np.ndarray]:
    """``(order, starts)``: the hits of track t are ``order[starts[t]:starts[t + 1]]``, in
    their original order (a stable counting sort)."""
    starts = np.zeros(n_tracks + 1, np.int64)
    for i in range(inverse.shape[0]):
        starts[inverse[i] + 1] += 1
    for t in range(n_tracks):
        starts[t + 1] += starts[t]
    fill = starts[:-1].copy()
    order = np.empty(inverse.shape[0], np.int64)
    for i in range(inverse.shape[0]):
        order[fill[inverse[i]]] = i
        fill[inverse[i]] += 1
    return order, starts


@njit
def tracks_to_fit(starts: np.ndarray) -> np.ndarray:
    """The tracks of >= 3 hits (``starts``: :func:`group_by_track`'s), the only ones a fit
    works on: a parallel loop over them shares the work evenly, where one over every track id
    gave a thread all the fitted tracks when their ids come first (a builder's candidates
    before its lone hits: event 21001's track table, 4,647 of 81,718 ids)."""
    count = 0
    for t in range(starts.shape[0] - 1):
        if starts[t + 1] - starts[t] >= 3:
            count += 1
    tracks = np.empty(count, np.int64)
    count = 0
    for t in range(starts.shape[0] - 1):
        if starts[t + 1] - starts[t] >= 3:
            tracks[count] = t
            count += 1
    return tracks


@numba.njit(cache=True, nogil=True, parallel=True, fastmath=False)
def hit_radii(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Each hit's transverse radius ``max(hypot(x, y), 1e-12)``: what every step and loss of
    the fit reads (computed once per fit instead of once per hit, step and start)."""
    out = np.empty(x.shape[0])
    for i in numba.prange(x.shape[0]):
        out[i] = floor_max(math.hypot(x[i], y[i]), 1e-12)
    return out


@njit
def circle_steps(hits: np.ndarray, u: np.ndarray, v: np.ndarray, x: np.ndarray, y: np.ndarray,
                 hit_radius: np.ndarray, sigma_fine: np.ndarray, sigma_r: np.ndarray,
                 a: float, b: float,
                 radius: float, fitted: bool, steps: int, pixel_sigma2: float,
                 outlier_scale: float, max_radius: float,
                 work: np.ndarray) -> tuple[float, float, float]:
    """``steps`` Gauss-Newton steps of one track (its hits ``hits``, in their original order)
    from ``(a, b, radius)`` (module docstring); the new ``(a, b, radius)``. ``hit_radius`` is
    each hit's ``max(hypot(x, y), 1e-12)`` (made once per fit: :func:`hit_radii`). ``work``
    [4, 3, 3] is scratch: the normal equations, the right-hand side and step, the solver's
    copies."""
    m, scratch = work[0], work[1]
    rhs, step, scratch_rhs = work[2, 0], work[2, 1], work[2, 2]
    for _ in range(steps):
        s_uu = s_uv = s_vv = s_u = s_v = s_1 = r_u = r_v = r_1 = 0.0
        for k in range(hits.shape[0]):
            i = hits[k]
            du, dv = u[i] - a, v[i] - b
            dist = floor_max(math.sqrt(du * du + dv * dv), 1e-12)
            inverse = 1.0 / dist
            res = dist - radius
            cos_beta = (du * x[i] + dv * y[i]) * inverse / hit_radius[i]
            coarse = sigma_r[i] * cos_beta
            sigma2 = sigma_fine[i] * sigma_fine[i] + coarse * coarse
            scaled = res / outlier_scale
            w = pixel_sigma2 / (sigma2 * (1.0 + scaled * scaled))
            ju, jv = -du * inverse, -dv * inverse
            s_uu += w * ju * ju
            s_uv += w * ju * jv
            s_vv += w * jv * jv
            s_u += w * ju
            s_v += w * jv
            s_1 += w
            r_u += w * ju * res
            r_v += w * jv * res
            r_1 += w * res
        m[0, 0], m[0, 1], m[0, 2] = s_uu, s_uv, -s_u
        m[1, 0], m[1, 1], m[1, 2] = s_uv, s_vv, -s_v
        m[2, 0], m[2, 1], m[2, 2] = -s_u, -s_v, s_1
        rhs[0], rhs[1], rhs[2] = -r_u, -r_v, r_1
        solve3(m, rhs, step, scratch, scratch_rhs)
        for c in range(3):          # np.nan_to_num(step, nan=np.inf)
            if step[c] != step[c]:
                step[c] = np.inf
            elif step[c] == np.inf:
                step[c] = _LARGEST
            elif step[c] == -np.inf:
                step[c] = -_LARGEST
        new_radius = radius + step[2]
        finite = math.isfinite(step[0]) and math.isfinite(step[1]) and math.isfinite(step[2])
        if finite and fitted and new_radius > 0 and new_radius <= max_radius:
            a = a + step[0]
            b = b + step[1]
            radius = new_radius
    return a, b, radius
