"""The hits of an event in a transverse grid, and the hits within a radius of a point, compiled:
the one neighbour search of the track builder (trkx.tracks.builder.ball_kernels: the extension,
the layer swap, the stitching) and of the short tracks' continuation count
(trkx.tracks.fit.continuation_kernels).

The hits are binned in the transverse plane in squares of side ``s`` and sorted by z within each
square (:func:`square_grid`). The hits within ``rho`` of a point ``p``,

    { i : (x_i - p_x)^2 + (y_i - p_y)^2 + (z_i - p_z)^2 <= rho^2 },

lie in the squares that the box ``[p - rho, p + rho]`` overlaps, at z within ``rho`` of ``p_z``:
a binary search per square for the first, then the square's hits in z order until ``z_i - p_z >
rho`` (:func:`gather_within`).
"""

from __future__ import annotations

import numba
import numpy as np

njit = numba.njit(cache=True, nogil=True, fastmath=False, error_model="numpy")
#: Squares of at most this many hits are sorted by insertion, larger ones by a merge sort.
INSERTION_SORT_MAX = 32


@njit
def sort_small(values: np.ndarray, n: int) -> None:
    """``values[:n]`` sorted ascending in place: a few values (a search's usual count) by
    insertion, more than :data:`INSERTION_SORT_MAX` by a merge sort (np.sort allocates a copy,
    which cost more than sorting the few)."""
    if n > INSERTION_SORT_MAX:
        values[:n] = np.sort(values[:n])
        return
    for k in range(1, n):
        value = values[k]
        j = k - 1
        while j >= 0 and values[j] > value:
            values[j + 1] = values[j]
            j -= 1
        values[j + 1] = value


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
    starts = np.zeros(nx * ny + 1, np.int64)
    for i in range(x.shape[0]):
        starts[cell[i] + 1] += 1
    for c in range(nx * ny):
        starts[c + 1] += starts[c]
    order = np.empty(x.shape[0], np.int64)     # a counting sort: stable, hits in index order
    fill = starts[:-1].copy()
    for i in range(x.shape[0]):
        order[fill[cell[i]]] = i
        fill[cell[i]] += 1
    for c in range(nx * ny):                   # each square by z, stably: few hits by
        lo, hi = starts[c], starts[c + 1]      # insertion, many by a merge sort
        if hi - lo > INSERTION_SORT_MAX:
            run = order[lo:hi]
            order[lo:hi] = run[np.argsort(z[run], kind="mergesort")]
            continue
        for k in range(lo + 1, hi):
            hit, key = order[k], z[order[k]]
            j = k - 1
            while j >= lo and z[order[j]] > key:
                order[j + 1] = order[j]
                j -= 1
            order[j + 1] = hit
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
def gather_within(px: float, py: float, pz: float, rho: float, x, y, z, order, starts, x0, y0,
                  nx, ny, side, out, n, write: bool = True):
    """``(out, n)`` with the hits within ``rho`` of ``(px, py, pz)`` written into ``out`` from
    position ``n`` on (in the grid's order), ``out`` replaced by a larger copy when it is full,
    and ``n`` their new end; without ``write`` they are only counted (``out`` untouched)."""
    # the squares the box [p - rho, p + rho] overlaps (widened by a hair against rounding):
    # 2 x 2 for most points, where the squares within ceil(rho / side) of the point's own were
    # 3 x 3
    reach = rho + 1e-9 * side
    i_lo = int(min(max(np.floor((px - reach - x0) / side), 0.0), float(nx)))
    i_hi = int(min(max(np.floor((px + reach - x0) / side) + 1.0, 0.0), float(nx)))
    j_lo = int(min(max(np.floor((py - reach - y0) / side), 0.0), float(ny)))
    j_hi = int(min(max(np.floor((py + reach - y0) / side) + 1.0, 0.0), float(ny)))
    r2 = rho * rho
    for i in range(i_lo, i_hi):
        for j in range(j_lo, j_hi):
            lo, hi = starts[i * ny + j], starts[i * ny + j + 1]
            if hi == lo:
                continue
            for k in range(lo + first_at_least(z, order[lo:hi], pz - rho), hi):
                h = order[k]
                dz = z[h] - pz
                if dz > rho:
                    break
                dx, dy = x[h] - px, y[h] - py
                if dx * dx + dy * dy + dz * dz <= r2:
                    if not write:
                        n += 1
                        continue
                    if n == out.shape[0]:
                        grown = np.empty(max(2 * n, 16), np.int64)
                        grown[:n] = out[:n]
                        out = grown
                    out[n] = h
                    n += 1
    return out, n
