"""The continuation count of short tracks, compiled (trkx.tracks.fit.short_inputs).

:func:`continuation_counts` computes what ``short_inputs.continuation`` computed with a k-d
tree: for each helix, the points every ``step`` mm of path within ``reach`` beyond its last hit
(ahead) and between the beam line and its first hit (behind); the hits within ``radius``
(3-D distance) of any point are the candidates; a candidate counts when it lies within the
windows around the helix (``|e| < window_xy``, ``|dz| < window_z``), is not the track's own,
and is beyond ``s_max`` (ahead) or in ``(0, s_min)`` (behind); the result per helix and
direction is the number of distinct layers of counted hits that the track has no hit on.

The hits within ``radius`` of a point come from the grid search of trkx.tracks.grid_kernels
(squares of side ``radius``: the 3 x 3 squares around the point). Helices are independent: the
threads share them (``prange``).
"""

from __future__ import annotations

import math

import numba
import numpy as np

from trkx.tracks.fit.helix_kernels import remainder
from trkx.tracks.grid_kernels import gather_within, sort_small, square_grid

njit = numba.njit(cache=True, nogil=True, fastmath=False, error_model="numpy")


@njit
def _contains(sorted_keys: np.ndarray, key: int) -> bool:
    i = np.searchsorted(sorted_keys, key)
    return i < sorted_keys.shape[0] and sorted_keys[i] == key


@njit
def _sort_unique(values: np.ndarray, n: int) -> int:
    """``values[:m]`` <- the distinct values of ``values[:n]``, ascending (``np.unique``'s), in
    place (trkx.tracks.grid_kernels.sort_small); returns ``m``."""
    sort_small(values, n)
    m = 0
    for k in range(n):
        if m == 0 or values[k] != values[m - 1]:
            values[m] = values[k]
            m += 1
    return m


@njit
def _count(t, direction, x, y, z, labels, layer, ids, a, b, radius, sense, alpha0, z0, cot,
           s_min, s_max, own_keys, window_xy, window_z, reach, step, search_radius, key_scale,
           order, starts, x0, y0, nx, ny) -> int:
    """One helix's count in one direction (0: ahead, 1: behind; module docstring)."""
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
        found, n_found = gather_within(px, py, pz, search_radius, x, y, z, order, starts,
                                       x0, y0, nx, ny, search_radius, found, n_found)
    if n_found == 0:
        return 0
    candidates = found[:_sort_unique(found, n_found)]
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
    return _sort_unique(layers, n_layers)


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
