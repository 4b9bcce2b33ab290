"""The generalised least squares of every track (trkx.tracks.fit.covariance), compiled with
Cholesky factors in place of general solves and inverses.

For one block of a track (across or along the beam: ``n`` hits in path order, residuals
``r``, Jacobian ``J`` [n, k], k = 3 or 2), with the hits' covariance ``V = L L^T`` (module
docstring of covariance; ``L`` its Cholesky factor):

    A = L^-1 J,   b = L^-1 r,   M = A^T A = J^T V^-1 J = R R^T,   g = A^T b = J^T V^-1 r,

    chi2 = b.b - |R^-1 g|^2,   C = M^-1,   C_ii = sum_j ((R^-1)_ji)^2,

and the correction with the curvature held, the first two parameters ``h``:
``M_hh^-1 g_h``, ``M_hh = R_hh R_hh^T`` (the leading 2 x 2 of ``R``). This is
``covariance._gls_numpy``'s arithmetic (``np.linalg.solve`` and ``inv`` on the same matrices)
by triangular solves only: V and M are symmetric positive definite. A block whose ``M`` is
singular (e.g. its hits at one path length) gives NaN errors and corrections.

The curvature's variance is that of the value reported, the robust fit's, not the GLS's: the
robust fit weighs each hit by its resolution alone (``W = diag(sigma^-2)``), so near the fit it
is the linear estimator ``kappa = a . r`` with ``a = W J (J^T W J)^-1 e_kappa``, whose variance
under the hits' covariance ``V = sum_c theta_c^2 u_c u_c^T + diag(sigma^2)`` (``u_c,i = max(s_i
- s_c, 0)``, the lever of crossing ``c`` on hit ``i``) is

    var(kappa) = a^T V a = sum_i a_i^2 sigma_i^2 + sum_c theta_c^2 (u_c . a)^2   (>= C_kk).
"""

from __future__ import annotations

import math

import numba
import numpy as np

njit = numba.njit(cache=True, nogil=True, fastmath=False, error_model="numpy")


@njit
def cholesky(m: np.ndarray, n: int) -> bool:
    """``m[:n, :n] = L`` in place (lower triangle; the upper is left as it was), ``L L^T`` the
    symmetric positive definite matrix it held; False when it is not."""
    for j in range(n):
        total = m[j, j]
        for k in range(j):
            total -= m[j, k] * m[j, k]
        if not total > 0.0:
            return False
        pivot = math.sqrt(total)
        m[j, j] = pivot
        for i in range(j + 1, n):
            total = m[i, j]
            for k in range(j):
                total -= m[i, k] * m[j, k]
            m[i, j] = total / pivot
    return True


@njit
def forward(factor: np.ndarray, n: int, values: np.ndarray) -> None:
    """``values[:n] = L^-1 values[:n]`` in place, ``L`` the lower triangle of ``factor``."""
    for i in range(n):
        total = values[i]
        for k in range(i):
            total -= factor[i, k] * values[k]
        values[i] = total / factor[i, i]


@njit
def gls_block(s: np.ndarray, residual: np.ndarray, sigma: np.ndarray, angle: np.ndarray,
              jacobian: np.ndarray, variances: np.ndarray, correction: np.ndarray) -> float:
    """One block of a track (module docstring): its chi2 contribution; ``variances`` [k] the
    diagonal of ``C``, ``correction`` [2] the held correction (NaN when ``M`` is
    singular). ``s`` the hits' path lengths in order, ``angle`` each crossing's scattering
    angle in the block's projection."""
    n, k = jacobian.shape
    v = np.empty((n, n))
    for i in range(n):
        for j in range(i + 1):
            total = 0.0
            for c in range(j + 1):          # crossings before both hits (s in path order)
                lever = angle[c] * angle[c]
                total += max(s[i] - s[c], 0.0) * max(s[j] - s[c], 0.0) * lever
            v[i, j] = total
        v[i, i] += sigma[i] * sigma[i]
    variances[:] = np.nan
    correction[:] = np.nan
    if not cholesky(v, n):
        return np.nan
    a = np.empty((k, n))                   # A^T, a row per parameter
    for p in range(k):
        for i in range(n):
            a[p, i] = jacobian[i, p]
        forward(v, n, a[p])
    b = residual.copy()
    forward(v, n, b)
    m = np.empty((k, k))
    g = np.empty(k)
    for p in range(k):
        g[p] = np.dot(a[p], b)
        for q in range(p + 1):
            m[p, q] = np.dot(a[p], a[q])
    if not cholesky(m, k):
        return np.nan
    chi2 = np.dot(b, b)
    projected = g.copy()
    forward(m, k, projected)
    chi2 -= np.dot(projected, projected)
    for p in range(k):                     # C_pp = sum_j ((R^-1)_jp)^2, column p of R^-1
        unit = np.zeros(k)
        unit[p] = 1.0
        forward(m, k, unit)
        variances[p] = np.dot(unit, unit)
    held = g[:2].copy()                    # M_hh^-1 g_h = R_hh^-T R_hh^-1 g_h
    forward(m, 2, held)
    for i in range(1, -1, -1):
        total = held[i]
        for r in range(i + 1, 2):
            total -= m[r, i] * correction[r]
        correction[i] = total / m[i, i]
    return chi2


@njit
def weighted_variance(s: np.ndarray, sigma: np.ndarray, angle: np.ndarray,
                      jacobian: np.ndarray, parameter: int) -> float:
    """``a^T V a`` of the module docstring: the variance of parameter ``parameter`` of the
    least squares weighted by ``sigma^-2`` alone, under the hits' covariance with the
    scattering (NaN when ``J^T W J`` is singular)."""
    n, k = jacobian.shape
    m = np.zeros((k, k))
    for p in range(k):
        for q in range(p + 1):
            total = 0.0
            for i in range(n):
                total += jacobian[i, p] * jacobian[i, q] / (sigma[i] * sigma[i])
            m[p, q] = total
    if not cholesky(m, k):
        return np.nan
    e = np.zeros(k)                        # (J^T W J)^-1 e_p = R^-T R^-1 e_p
    e[parameter] = 1.0
    forward(m, k, e)
    for i in range(k - 1, -1, -1):
        total = e[i]
        for r in range(i + 1, k):
            total -= m[r, i] * e[r]
        e[i] = total / m[i, i]
    a = np.empty(n)
    variance = 0.0
    for i in range(n):
        total = 0.0
        for p in range(k):
            total += jacobian[i, p] * e[p]
        a[i] = total / (sigma[i] * sigma[i])
        variance += a[i] * a[i] * sigma[i] * sigma[i]
    for c in range(n):                     # a crossing's kick moves every later hit
        lever = 0.0
        for i in range(c + 1, n):
            lever += max(s[i] - s[c], 0.0) * a[i]
        variance += angle[c] * angle[c] * lever * lever
    return variance


@numba.njit(cache=True, nogil=True, parallel=True, fastmath=False, error_model="numpy")
def gls_per_track(starts: np.ndarray, s: np.ndarray, across: np.ndarray, along: np.ndarray,
                  sigma_across: np.ndarray, sigma_along: np.ndarray, bend: np.ndarray,
                  angle_across: np.ndarray, angle_along: np.ndarray, sense: np.ndarray,
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``covariance._gls_numpy`` (its arguments and outputs) by :func:`gls_block`, the tracks
    shared by the threads (each writes its own row)."""
    n_tracks = len(starts) - 1
    chi2, ndf = np.zeros(n_tracks), np.zeros(n_tracks)
    var, delta = np.full((n_tracks, 5), np.nan), np.zeros((n_tracks, 5))
    for t in numba.prange(n_tracks):
        lo, hi = starts[t], starts[t + 1]
        n = hi - lo
        if n < 3:
            continue
        st = s[lo:hi]
        across_jacobian = np.empty((n, 3))
        along_jacobian = np.empty((n, 2))
        for i in range(n):
            turn = sense[lo + i]
            across_jacobian[i, 0], across_jacobian[i, 1] = turn, turn * st[i]
            across_jacobian[i, 2] = bend[lo + i]
            along_jacobian[i, 0], along_jacobian[i, 1] = 1.0, st[i]
        total = gls_block(st, -across[lo:hi], sigma_across[lo:hi], angle_across[lo:hi],
                          across_jacobian, var[t, 0:3], delta[t, 0:2])
        if var[t, 2] == var[t, 2]:          # the robust fit's curvature: its own variance
            var[t, 2] = weighted_variance(st, sigma_across[lo:hi], angle_across[lo:hi],
                                          across_jacobian, 2)
        total += gls_block(st, along[lo:hi], sigma_along[lo:hi], angle_along[lo:hi],
                           along_jacobian, var[t, 3:5], delta[t, 3:5])
        chi2[t], ndf[t] = total, 2 * n - 5
    return chi2, ndf, var, delta
