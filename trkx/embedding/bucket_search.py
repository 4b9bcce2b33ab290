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
``numba.set_num_threads``). The kernels compile on first use (~10-15 s) and are cached on disk
by numba afterwards.
"""

from __future__ import annotations

import numpy as np

_KERNELS = None


def _compile():
    """Compile (or load from numba's cache) the kernels; numba is imported only here."""
    global _KERNELS
    if _KERNELS is not None:
        return _KERNELS
    import numba

    njit = numba.njit(cache=True, nogil=True, fastmath=False)
    pjit = numba.njit(cache=True, nogil=True, parallel=True, fastmath=True)

    @njit
    def build_buckets(y, bucket):
        """Permutation of the rows and bucket bounds [n_buckets + 1] of a median kd split."""
        n, dim = y.shape
        perm = np.arange(n)
        stack = np.empty((128, 2), np.int64)
        stack[0, 0], stack[0, 1] = 0, n
        top, n_buckets = 1, 0
        starts = np.empty(2 * (n // max(bucket, 1)) + 3, np.int64)
        while top > 0:
            top -= 1
            s, t = stack[top, 0], stack[top, 1]
            if t - s <= bucket:
                starts[n_buckets] = s
                n_buckets += 1
                continue
            axis, widest = 0, -1.0
            for d in range(dim):
                lo, hi = np.inf, -np.inf
                for r in range(s, t):
                    v = y[perm[r], d]
                    lo = min(lo, v)
                    hi = max(hi, v)
                if hi - lo > widest:
                    axis, widest = d, hi - lo
            mid = (s + t) // 2
            left, right = s, t - 1
            while left < right:  # quickselect: perm[s:mid] <= perm[mid] <= perm[mid+1:t]
                pivot = y[perm[(left + right) // 2], axis]
                a, b = left, right
                while a <= b:
                    while y[perm[a], axis] < pivot:
                        a += 1
                    while y[perm[b], axis] > pivot:
                        b -= 1
                    if a <= b:
                        perm[a], perm[b] = perm[b], perm[a]
                        a += 1
                        b -= 1
                if b < mid:
                    left = a
                if mid < a:
                    right = b
            stack[top, 0], stack[top, 1] = mid, t
            stack[top + 1, 0], stack[top + 1, 1] = s, mid
            top += 2
        starts = np.sort(starts[:n_buckets])
        bounds = np.empty(n_buckets + 1, np.int64)
        bounds[:n_buckets] = starts
        bounds[n_buckets] = n
        return perm, bounds

    @njit
    def covariance(points, step):
        """Mean and covariance (float64) of every step-th row."""
        n, dim = points.shape
        mean = np.zeros(dim)
        count = 0
        for i in range(0, n, step):
            count += 1
            for d in range(dim):
                mean[d] += points[i, d]
        mean /= count
        cov = np.zeros((dim, dim))
        for i in range(0, n, step):
            for d in range(dim):
                u = points[i, d] - mean[d]
                for e in range(dim):
                    cov[d, e] += u * (points[i, e] - mean[e])
        return mean, cov / count

    @pjit
    def rotate(points, mean, rotation):
        """y = (points - mean) @ rotation, row-parallel."""
        n, dim = points.shape
        out = np.empty((n, rotation.shape[1]), np.float32)
        for i in numba.prange(n):
            for c in range(rotation.shape[1]):
                acc = np.float32(0.0)
                for d in range(dim):
                    acc += (points[i, d] - mean[d]) * rotation[d, c]
                out[i, c] = acc
        return out

    @pjit
    def boxes(y, bounds):
        n_buckets, dim = len(bounds) - 1, y.shape[1]
        lo = np.empty((n_buckets, dim), y.dtype)
        hi = np.empty((n_buckets, dim), y.dtype)
        for b in numba.prange(n_buckets):
            for d in range(dim):
                lo[b, d] = y[bounds[b], d]
                hi[b, d] = y[bounds[b], d]
            for r in range(bounds[b] + 1, bounds[b + 1]):
                for d in range(dim):
                    lo[b, d] = min(lo[b, d], y[r, d])
                    hi[b, d] = max(hi[b, d], y[r, d])
        return lo, hi

    @njit
    def _keep_smallest(values, index, used, k):
        """Quickselect: move the k smallest of values[:used] (with their index) to the front."""
        left, right = 0, used - 1
        while left < right:
            pivot = values[(left + right) // 2]
            a, b = left, right
            while a <= b:
                while values[a] < pivot:
                    a += 1
                while values[b] > pivot:
                    b -= 1
                if a <= b:
                    values[a], values[b] = values[b], values[a]
                    index[a], index[b] = index[b], index[a]
                    a += 1
                    b -= 1
            if b < k - 1:
                left = a
            if k - 1 < a:
                right = b

    @pjit
    def search(y, xt, bounds, lo, hi, r2, k, perm):
        """[N, k] partners (original indices, -1 padded) and squared distances, by original row."""
        n, dim = y.shape
        n_buckets = len(bounds) - 1
        widest = np.max(bounds[1:] - bounds[:-1])
        out = np.full((n, k), -1, np.int64)
        out_d = np.full((n, k), np.inf, np.float32)
        lo_t, hi_t = lo.T.copy(), hi.T.copy()
        for a in numba.prange(n_buckets):
            gaps = np.zeros(n_buckets, np.float32)
            for d in range(dim):
                lo_a, hi_a = lo_t[d, a], hi_t[d, a]
                lo_d, hi_d = lo_t[d], hi_t[d]
                for b in range(n_buckets):
                    v = max(lo_a - hi_d[b], lo_d[b] - hi_a, np.float32(0.0))
                    gaps[b] += v * v
            near = np.nonzero(gaps < r2)[0]
            order = near[np.argsort(gaps[near])]
            m = len(order)
            tmp = np.empty(widest, np.float32)
            q = np.empty(dim, np.float32)
            cap = 2 * k + widest
            buf_d = np.empty(cap, np.float32)
            buf_j = np.empty(cap, np.int64)
            for i in range(bounds[a], bounds[a + 1]):
                thr = r2  # no partner at >= thr can be among the k nearest
                used = 0
                for d in range(dim):
                    q[d] = xt[d, i]
                for mm in range(m):
                    b = order[mm]
                    if gaps[b] >= thr:
                        break
                    g = np.float32(0.0)
                    for d in range(dim):
                        v = max(lo[b, d] - y[i, d], y[i, d] - hi[b, d], np.float32(0.0))
                        g += v * v
                    if g >= thr:
                        continue
                    s, t = bounds[b], bounds[b + 1]
                    tmp[: t - s] = 0.0
                    for d in range(dim):
                        qd = q[d]
                        row = xt[d, s:t]
                        for jj in range(t - s):
                            v = row[jj] - qd
                            tmp[jj] += v * v
                    if s <= i < t:
                        tmp[i - s] = np.inf  # not its own partner
                    for jj in range(t - s):  # branch-free compaction of the entries < thr
                        buf_d[used] = tmp[jj]
                        buf_j[used] = jj + s
                        used += tmp[jj] < thr
                    if used >= k and (thr == r2 or used + widest > cap):
                        # keep the k nearest; no partner at or beyond the k-th can enter
                        _keep_smallest(buf_d, buf_j, used, k)
                        used = k
                        thr = buf_d[0]
                        for c in range(1, k):
                            thr = max(thr, buf_d[c])
                if used > k:
                    _keep_smallest(buf_d, buf_j, used, k)
                    used = k
                for c in range(used):
                    out[perm[i], c] = perm[buf_j[c]]
                    out_d[perm[i], c] = buf_d[c]
        return out, out_d

    @pjit
    def keep_once(table, rank):
        """keep[i, c]: whether proposal table[i, c] is where its pair is emitted."""
        n, k = table.shape
        keep = np.zeros((n, k), np.bool_)
        for i in numba.prange(n):
            for c in range(k):
                j = table[i, c]
                if j < 0:
                    continue
                if rank[i] < rank[j]:
                    keep[i, c] = True
                else:
                    mutual = False
                    for cc in range(k):
                        mutual |= table[j, cc] == i
                    keep[i, c] = not mutual
        return keep

    @pjit
    def sort_segments(outer, start):
        """Sort every segment of outer in place; [n + 1] counts of distinct values (from 1)."""
        n = len(start) - 1
        unique = np.zeros(n + 1, np.int64)
        for u in numba.prange(n):
            s, t = start[u], start[u + 1]
            for a in range(s + 1, t):  # insertion sort: a segment holds about k entries
                v = outer[a]
                b = a - 1
                while b >= s and outer[b] > v:
                    outer[b + 1] = outer[b]
                    b -= 1
                outer[b + 1] = v
            for a in range(s, t):
                unique[u + 1] += a == s or outer[a] != outer[a - 1]
        return unique

    @pjit
    def write_pairs(outer, start, offset):
        """[2, E] (u, v) from the sorted segments, repeats (a row naming a partner twice) out."""
        n = len(start) - 1
        edges = np.empty((2, offset[n]), np.int64)
        for u in numba.prange(n):
            w = offset[u]
            for a in range(start[u], start[u + 1]):
                if a == start[u] or outer[a] != outer[a - 1]:
                    edges[0, w] = u
                    edges[1, w] = outer[a]
                    w += 1
        return edges

    @njit
    def sorted_pairs(table, rank, keep):
        """[2, E] (inner, outer) of the kept proposals, sorted by inner then outer."""
        n, k = table.shape
        start = np.zeros(n + 1, np.int64)
        for i in range(n):
            for c in range(k):
                if keep[i, c]:
                    j = table[i, c]
                    start[(i if rank[i] < rank[j] else j) + 1] += 1
        for i in range(n):
            start[i + 1] += start[i]
        fill = start[:-1].copy()
        outer = np.empty(start[n], np.int64)
        for i in range(n):
            for c in range(k):
                if keep[i, c]:
                    j = table[i, c]
                    u, v = (i, j) if rank[i] < rank[j] else (j, i)
                    outer[fill[u]] = v
                    fill[u] += 1
        unique = sort_segments(outer, start)
        for u in range(n):
            unique[u + 1] += unique[u]
        return write_pairs(outer, start, unique)

    _KERNELS = (covariance, build_buckets, rotate, boxes, search, keep_once, sorted_pairs)
    return _KERNELS


def bucket_neighbours(points: np.ndarray, radius: float, k: int, bucket: int = 64,
                      threads: int | None = None) -> np.ndarray:
    """Proposal table [N, k] (int64, -1 padded) of the module docstring; exact.

    ``points`` is [N, d] float32; ``bucket`` is the leaf size (64 was fastest at 119k hits in
    12 dimensions); ``threads`` (default: numba's) sets the parallel workers.
    """
    n = len(points)
    if n == 0:
        return np.zeros((0, k), np.int64)
    covariance, build_buckets, rotate, boxes, search, _, _ = _compile()
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
    table, _ = search(y, xt, bounds, lo, hi, np.float32(radius) ** 2, int(k), perm)
    return table


def unique_directed_pairs(table: np.ndarray, rank: np.ndarray) -> np.ndarray:
    """The edges [2, E] of a proposal table (trkx.embedding.graph.table_to_edges), compiled.

    Pair {i, j} (u = the one of lower ``rank``, v the other) is an edge when u proposes v or v
    proposes u. It is emitted once, from u's row when u proposes v, else from v's row (a scan
    of u's row, k entries, tells which). The kept pairs are grouped by u with a counting sort
    and each group sorted by v (repeats, from a row that names a partner twice, dropped): the
    result is ordered by (u, v), as table_to_edges orders it.
    """
    *_, keep_once, sorted_pairs = _compile()
    table = np.ascontiguousarray(table, dtype=np.int64)
    rank = np.ascontiguousarray(rank, dtype=np.int64)
    if table.size == 0:
        return np.zeros((2, 0), np.int64)
    return sorted_pairs(table, rank, keep_once(table, rank))
