"""The continuation count of short tracks, compiled (trkx.tracks.fit.short_inputs).

:func:`continuation_counts` computes what ``short_inputs.continuation`` computed with a k-d
tree: for each helix, the points every ``step`` mm of path within ``reach`` beyond its last hit
(ahead) and between the beam line and its first hit (behind); the hits within ``radius``
(3-D distance) of any point are the candidates; a candidate counts when it lies within the
windows around the helix (``|e| < window_xy``, ``|dz| < window_z``), is not the track's own,
and is beyond ``s_max`` (ahead) or in ``(0, s_min)`` (behind); the result per helix and
direction is the number of distinct layers of counted hits that the track has no hit on.

The hits are binned in the transverse plane in squares of side ``radius`` and sorted by z
within each square, so a point's neighbours are those of the 3 x 3 squares around it whose z
lies within ``radius`` (two binary searches per square). Helices are independent: the threads
share them (``prange``).
"""

from __future__ import annotations

import math

import numba
import numpy as np

from trkx.tracks.fit.helix_kernels import remainder

njit = numba.njit(cache=True, nogil=True, fastmath=False, error_model="numpy")


@njit
def square_grid(x: np.ndarray, y: np.ndarray, z: np.ndarray, side: float):
    """``(order, starts, x0, y0, nx, ny)``: the hits of square ``(i, j)`` (``i = floor((x -
    x0) / side)``) are ``order[starts[i * ny + j]:starts[i * ny + j + 1]]``, sorted by z."""
    x0, y0 = x.min() - side, y.min() - side
    nx = int((x.max() - x0) / side) + 2
    ny = int((y.max() - y0) / side) + 2
    cell = np.empty(x.shape[0], np.int64)
    for i in range(x.shape[0]):
        cell[i] = int((x[i] - x0) / side) * ny + int((y[i] - y0) / side)
    order = np.argsort(cell, kind="mergesort")
    starts = np.zeros(nx * ny + 1, np.int64)
    for i in range(x.shape[0]):
        starts[cell[i] + 1] += 1
    for c in range(nx * ny):
        starts[c + 1] += starts[c]
    for c in range(nx * ny):
        lo, hi = starts[c], starts[c + 1]
        if hi - lo > 1:
            run = order[lo:hi]
            order[lo:hi] = run[np.argsort(z[run], kind="mergesort")]
    return order, starts, x0, y0, nx, ny


@njit
def first_at_least(values: np.ndarray, run: np.ndarray, target: float) -> int:
    """The first position of ``run`` whose ``values`` is >= ``target`` (``run`` sorted by it)."""
    lo, hi = 0, run.shape[0]
    while lo < hi:
        mid = (lo + hi) // 2
        if values[run[mid]] < target:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit
def _contains(sorted_keys: np.ndarray, key: int) -> bool:
    i = np.searchsorted(sorted_keys, key)
    return i < sorted_keys.shape[0] and sorted_keys[i] == key


@njit
def _count(t, direction, x, y, z, labels, layer, ids, a, b, radius, sense, alpha0, z0, cot,
           s_min, s_max, own_keys, window_xy, window_z, reach, step, search_radius, key_scale,
           order, starts, x0, y0, nx, ny) -> int:
    """One helix's count in one direction (0: ahead, 1: behind; module docstring)."""
    r2 = search_radius * search_radius
    n_steps = int(np.ceil(reach / step))
    start = s_max[t] + step if direction == 0 else step
    stop = s_max[t] + reach if direction == 0 else s_min[t] - step
    found = np.empty(64, np.int64)
    n_found = 0
    for k in range(n_steps):
        path = start + k * step
        if not path <= stop:
            continue
        angle = alpha0[t] + sense[t] * path / radius[t]
        px = a[t] + radius[t] * math.cos(angle)
        py = b[t] + radius[t] * math.sin(angle)
        pz = z0[t] + cot[t] * path
        ci = int((px - x0) / search_radius)
        cj = int((py - y0) / search_radius)
        for i in range(max(ci - 1, 0), min(ci + 2, nx)):
            for j in range(max(cj - 1, 0), min(cj + 2, ny)):
                lo, hi = starts[i * ny + j], starts[i * ny + j + 1]
                if hi == lo:
                    continue
                first = lo + first_at_least(z, order[lo:hi], pz - search_radius)
                for q in range(first, hi):
                    h = order[q]
                    dz = z[h] - pz
                    if dz > search_radius:
                        break
                    dx, dy = x[h] - px, y[h] - py
                    if dx * dx + dy * dy + dz * dz <= r2:
                        if n_found == found.shape[0]:
                            grown = np.empty(2 * n_found, np.int64)
                            for c in range(n_found):
                                grown[c] = found[c]
                            found = grown
                        found[n_found] = h
                        n_found += 1
    if n_found == 0:
        return 0
    candidates = np.unique(found[:n_found])
    layers = np.empty(candidates.shape[0], np.int64)
    n_layers = 0
    for h in candidates:
        e = math.hypot(x[h] - a[t], y[h] - b[t]) - radius[t]
        turn = math.atan2(y[h] - b[t], x[h] - a[t]) - alpha0[t]
        turn = remainder(turn + np.pi, 2 * np.pi) - np.pi
        s = sense[t] * radius[t] * turn
        dz = z[h] - z0[t] - cot[t] * s
        if not (abs(e) < window_xy and abs(dz) < window_z and labels[h] != ids[t]):
            continue
        if direction == 0 and not s > s_max[t]:
            continue
        if direction == 1 and not (s > 0 and s < s_min[t]):
            continue
        if _contains(own_keys, t * key_scale + layer[h]):
            continue
        layers[n_layers] = layer[h]
        n_layers += 1
    return np.unique(layers[:n_layers]).shape[0] if n_layers else 0


@numba.njit(cache=True, nogil=True, parallel=True, fastmath=False, error_model="numpy")
def continuation_counts(x, y, z, labels, layer, ids, a, b, radius, sense, alpha0, z0, cot,
                        s_min, s_max, fitted, own_keys, window_xy, window_z, reach, step,
                        search_radius, key_scale):
    """Per helix, ``(ahead, behind)`` (module docstring); ``own_keys`` sorted
    ``row * key_scale + layer`` of every helix's own hits."""
    n = ids.shape[0]
    ahead = np.zeros(n, np.int64)
    behind = np.zeros(n, np.int64)
    order, starts, x0, y0, nx, ny = square_grid(x, y, z, search_radius)
    for t in numba.prange(n):
        if fitted[t]:
            ahead[t] = _count(t, 0, x, y, z, labels, layer, ids, a, b, radius, sense, alpha0,
                              z0, cot, s_min, s_max, own_keys, window_xy, window_z, reach, step,
                              search_radius, key_scale, order, starts, x0, y0, nx, ny)
            behind[t] = _count(t, 1, x, y, z, labels, layer, ids, a, b, radius, sense, alpha0,
                               z0, cot, s_min, s_max, own_keys, window_xy, window_z, reach, step,
                               search_radius, key_scale, order, starts, x0, y0, nx, ny)
    return ahead, behind
