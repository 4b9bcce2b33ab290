"""Exact k-nearest-within-R search with a kd-tree of buckets, compiled by numba (CPU).

The proposals of hit ``i`` (trkx.embedding.graph) are

    P_i = the (at most) k hits j != i nearest to i with |e_i - e_j| < R.

Layout. The points are rotated onto their principal axes (``y = (e - mean) V``, V orthogonal:
distances unchanged, and the leading axes carry most of the spread) and split recursively at
the median of the axis of widest extent until a cell holds at most ``bucket`` points (a
balanced kd-tree; only its leaves, the *buckets*, are kept, as contiguous row ranges of the
reordered points). Each bucket b has its bounding box [lo_b, hi_b] in y.

Bounds (both are lower bounds of every true distance, so pruning with them is exact):

    gap(a, b)^2 = sum_d max(lo_a,d - hi_b,d, lo_b,d - hi_a,d, 0)^2   <= |y_i - y_j|^2
    box(i, b)^2 = sum_d max(lo_b,d - y_i,d, y_i,d - hi_b,d, 0)^2     <= |y_i - y_j|^2

for i in bucket a, j in bucket b. For every bucket a, the buckets with gap(a, b) < R are listed
nearest first. Each query i of a keeps a threshold t_i, initially R^2 (only partners closer
than R ever enter), and a buffer of candidates below it; it visits the listed buckets in
order, stops at the first bucket with gap^2 >= t_i (every later one is farther), skips a
bucket with box(i, b)^2 >= t_i, and otherwise computes |e_i - e_j|^2 for the bucket's points
(in the original coordinates, vectorised over the bucket) and appends those below t_i. Once
the buffer holds >= k entries a quickselect keeps its k smallest and sets t_i to the largest of
them: a point at >= t_i can no longer be among the k nearest. At the end the k smallest of the
buffer are exactly P_i (ties at the k-th distance aside; distances are float32 sums, so a
partner within ~1e-6 relative of R or of the k-th distance may differ from cKDTree's float64).

Cost: O(N log N) to build, O((N / bucket)^2) for the bucket lists; per query, the points of
the buckets that the bounds cannot exclude (~480 at 119k hits, k = 32, bucket 64: about 15x
the k partners). Queries are independent: buckets run in parallel (numba prange,
``numba.set_num_threads``). The kernels (trkx.embedding.bucket_kernels, imported only when a
search runs: numba stays optional) compile on first use (~10-15 s) and are cached on disk by
numba; a later process loads them from there in a fraction of a second.
"""

from __future__ import annotations

import numpy as np


def bucket_neighbours(points: np.ndarray, radius: float, k: int, bucket: int = 64,
                      threads: int | None = None, groups: np.ndarray | None = None,
                      distances: bool = False) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """Proposal table [N, k] (int64, -1 padded) of the module docstring; exact; with
    ``distances``, also each proposal's squared distance [N, k] (float32, inf where -1).

    ``points`` is [N, d] float32; ``bucket`` is the leaf size (64 was fastest at 119k hits in
    12 dimensions); ``threads`` (default: numba's) sets the parallel workers; ``groups`` [N]
    (e.g. each hit's detector layer), when given, restricts P_i to the j with
    ``groups[j] != groups[i]``: the k nearest of the other groups, found by the search itself.
    """
    n = len(points)
    if n == 0:
        return np.zeros((0, k), np.int64)
    from trkx.embedding.bucket_kernels import boxes, build_buckets, covariance, rotate, search

    if threads is not None:
        import numba

        numba.set_num_threads(max(1, min(int(threads), numba.config.NUMBA_NUM_THREADS)))
    points = np.ascontiguousarray(points, dtype=np.float32)
    mean, cov = covariance(points, max(1, n // 8192))
    _, axes = np.linalg.eigh(cov)  # principal axes, ascending variance
    rotation = np.ascontiguousarray(axes[:, ::-1], dtype=np.float32)
    y = rotate(points, mean.astype(np.float32), rotation)
    perm, bounds = build_buckets(y, int(bucket))
    y = np.ascontiguousarray(y[perm])
    xt = np.ascontiguousarray(points[perm].T)
    lo, hi = boxes(y, bounds)
    own = np.zeros(1, np.int64) if groups is None else np.asarray(groups, np.int64)
    if groups is not None and own.shape != (n,):
        raise ValueError(f"groups must have one entry per point ({n}), got {own.shape}")
    table, squared = search(y, xt, bounds, lo, hi, np.float32(radius) ** 2, int(k), perm,
                            own if groups is None else np.ascontiguousarray(own[perm]),
                            groups is not None)
    return (table, squared) if distances else table


#: Relative distance to a row's threshold within which the pair kernel scans the row instead of
#: trusting the distances (the two directions' sums are the same float32 operations on the same
#: values; the margin also covers ties at the k-th partner).
THRESHOLD_MARGIN = 1e-5


def unique_directed_pairs(table: np.ndarray, rank: np.ndarray,
                          distances: np.ndarray | None = None) -> np.ndarray:
    """The edges [2, E] of a proposal table (trkx.embedding.graph.table_to_edges), compiled.

    Pair {i, j} (u = the one of lower ``rank``, v the other) is an edge when u proposes v or v
    proposes u. It is emitted once, from u's row when u proposes v, else from v's row (a scan
    of u's row, k entries, tells which). The kept pairs are grouped by u with a counting sort,
    parallel over blocks of rows (one per numba thread), and each group sorted by v (repeats,
    from a row that names a partner twice, dropped): the result is ordered by (u, v), as
    table_to_edges orders it, whatever the thread count.

    ``distances`` (the squared distances of :func:`bucket_neighbours`' exact table) replace
    the scan of v's row by a comparison with v's k-th distance (v proposes u exactly when u is
    nearer than v's k-th partner, or v has fewer than k), scanning only near that threshold:
    the same edges, a k-fold shorter check.
    """
    from trkx.embedding.bucket_kernels import keep_once, row_thresholds, sorted_pairs

    table = np.ascontiguousarray(table, dtype=np.int64)
    rank = np.ascontiguousarray(rank, dtype=np.int64)
    if table.size == 0:
        return np.zeros((2, 0), np.int64)
    import numba

    if distances is None:       # every partner's row scanned
        keep = keep_once(table, rank, np.zeros(table.shape, np.float32),
                         np.zeros(len(table), np.float32), 1.0)
    else:
        distances = np.ascontiguousarray(distances, dtype=np.float32)
        keep = keep_once(table, rank, distances, row_thresholds(table, distances),
                         THRESHOLD_MARGIN)
    return sorted_pairs(table, rank, keep, numba.get_num_threads())
