"""Hits within a radius of points, compiled: the search behind the extension's candidate pairs
(trkx.tracks.builder.extension.candidate_pairs) and the layer swap.

For points ``p_q`` with radii ``rho_q`` and hits ``h_i``,

    pairs = { (q, i) : |h_i - p_q| <= rho_q }        (3-D Euclidean distance)

ordered by ``q``, then ``i`` (the order of a k-d tree's sorted ball query), from the grid
search of trkx.tracks.grid_kernels: two passes over the points, count, then fill at the counts'
running sum (serial: a search is one layer's, too short for a parallel region to pay on a busy
machine).
"""

from __future__ import annotations

import numba
import numpy as np

from trkx.tracks.grid_kernels import gather_within, sort_small, square_grid

njit = numba.njit(cache=True, nogil=True, fastmath=False, error_model="numpy")

#: At most this many squares per hit: a small radius on a sparse layer gets wider squares (the
#: grid's set-up visits every square, the search only those near a point).
SQUARES_PER_HIT = 2.0


@njit
def ball_pairs(points: np.ndarray, radii: np.ndarray, x: np.ndarray, y: np.ndarray,
               z: np.ndarray, side: float) -> tuple[np.ndarray, np.ndarray]:
    """``(q, i)`` of every hit ``i`` within ``radii[q]`` of ``points[q]`` (module docstring),
    ordered by ``q`` then ``i``; ``side`` (mm, > 0) the grid's square."""
    n_points = points.shape[0]
    empty = np.zeros(0, np.int64)
    if n_points == 0 or x.shape[0] == 0:
        return empty, empty
    order, starts, x0, y0, nx, ny = square_grid(x, y, z, side)
    counts = np.zeros(n_points, np.int64)
    for q in range(n_points):
        counts[q] = gather_within(points[q, 0], points[q, 1], points[q, 2], radii[q], x, y, z,
                                  order, starts, x0, y0, nx, ny, side, empty, 0, False)[1]
    offsets = np.zeros(n_points + 1, np.int64)
    for q in range(n_points):
        offsets[q + 1] = offsets[q] + counts[q]
    query = np.empty(offsets[n_points], np.int64)
    hits = np.empty(offsets[n_points], np.int64)
    for q in range(n_points):
        a, b = offsets[q], offsets[q + 1]
        if a == b:
            continue
        segment = hits[a:b]             # exactly their number: filled in place, not grown
        gather_within(points[q, 0], points[q, 1], points[q, 2], radii[q], x, y, z, order,
                      starts, x0, y0, nx, ny, side, segment, 0)
        sort_small(segment, b - a)     # by hit
        query[a:b] = q
    return query, hits


def grid_side(x: np.ndarray, y: np.ndarray, radius: float) -> float:
    """The grid's square for a search of typical ``radius`` (e.g. the radii's median): that
    radius, or wider where the hits are too few for :data:`SQUARES_PER_HIT` squares per hit
    over their transverse extent."""
    if len(x) == 0:
        return max(float(radius), 1e-6)
    extent = max(float(np.ptp(x)), float(np.ptp(y)))
    per_side = max(1.0, float(np.sqrt(SQUARES_PER_HIT * len(x))))
    return max(float(radius), extent / per_side, 1e-6)
