"""The numba kernels of the bucket search (the math: trkx.embedding.bucket_search).

They live at module level in a module that imports numba at its top, so numba's on-disk cache
(``cache=True``) finds them again in a fresh process. numba keys a cached function by its
signature, the target CPU, its bytecode and a pickle of its closure variables; a kernel defined
inside a function that calls another compiled kernel holds that dispatcher in a closure cell,
and a dispatcher pickles differently in every process, so such a key never matched: every
process recompiled ``search`` and ``sorted_pairs`` (several seconds) and added a cache file.
Here the callees (``_keep_smallest``, ``sort_segments``, ``write_pairs``, ...) are module globals,
which are not part of the key. numba invalidates a file's cache entries when the file changes,
so callers and callees sharing this one file never load a stale callee.

Import this module only when the bucket backend runs: numba stays an optional dependency.
"""

from __future__ import annotations

import numba
import numpy as np

njit = numba.njit(cache=True, nogil=True, fastmath=False)
pjit = numba.njit(cache=True, nogil=True, parallel=True, fastmath=True)


@njit
def build_buckets(y: np.ndarray, bucket: int) -> tuple[np.ndarray, np.ndarray]:
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
def covariance(points: np.ndarray, step: int) -> tuple[np.ndarray, np.ndarray]:
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
def rotate(points: np.ndarray, mean: np.ndarray, rotation: np.ndarray) -> np.ndarray:
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
def boxes(y: np.ndarray, bounds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Bounding box [lo_b, hi_b] of every bucket b (rows bounds[b]:bounds[b + 1] of y)."""
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
def _keep_smallest(values: np.ndarray, index: np.ndarray, used: int, k: int) -> None:
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
def search(y: np.ndarray, xt: np.ndarray, bounds: np.ndarray, lo: np.ndarray, hi: np.ndarray,
           r2: float, k: int, perm: np.ndarray, group: np.ndarray, grouped: bool,
           ) -> tuple[np.ndarray, np.ndarray]:
    """[N, k] partners (original indices, -1 padded) and squared distances, by original row;
    with ``grouped``, ``group`` (by reordered row) excludes the partners of a query's own group
    (its layer); without, only the query itself is excluded (``group`` is not read)."""
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
                if grouped:  # not one of its own group (itself included)
                    own = group[i]
                    for jj in range(t - s):
                        if group[s + jj] == own:
                            tmp[jj] = np.inf
                elif s <= i < t:
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


#: A row threshold above every squared distance the search returns (finite: fastmath).
BEYOND_ANY_DISTANCE = np.float32(1e30)


@pjit
def row_thresholds(table: np.ndarray, distance: np.ndarray) -> np.ndarray:
    """Per row of a search's table: its largest squared distance when the row holds k partners
    (a hit farther than it cannot be among them), :data:`BEYOND_ANY_DISTANCE` when it holds
    fewer (every eligible hit within the radius is)."""
    n, k = table.shape
    out = np.full(n, BEYOND_ANY_DISTANCE, np.float32)
    for i in numba.prange(n):
        if k and table[i, k - 1] >= 0:
            largest = distance[i, 0]
            for c in range(1, k):
                largest = max(largest, distance[i, c])
            out[i] = largest
    return out


@pjit
def keep_once(table: np.ndarray, rank: np.ndarray, distance: np.ndarray,
              threshold: np.ndarray, margin: float) -> np.ndarray:
    """keep[i, c]: whether proposal j = table[i, c] is where the pair {i, j} is emitted: from
    i's row when i ranks lower, else only when j does not propose i back. With the exact
    search's squared distances, i at distance d is among j's proposals when d is below j's row
    threshold (:func:`row_thresholds`) and not when above it; within ``margin`` (relative) of
    it, where a tie or a last-bit difference of the two directions' sums could decide, j's row
    is scanned (zero distances and thresholds with ``margin`` 1: every row; the values stay
    finite, as the kernels' fastmath assumes)."""
    n, k = table.shape
    keep = np.zeros((n, k), np.bool_)
    for i in numba.prange(n):
        for c in range(k):
            j = table[i, c]
            if j < 0:
                continue
            if rank[i] < rank[j]:
                keep[i, c] = True
                continue
            d, limit = distance[i, c], threshold[j]
            if d < limit * (1 - margin):
                continue                      # j proposes i: the pair is j's to emit
            if d > limit * (1 + margin):
                keep[i, c] = True
                continue
            mutual = False
            for cc in range(k):
                mutual |= table[j, cc] == i
            keep[i, c] = not mutual
    return keep


@pjit
def sort_segments(outer: np.ndarray, start: np.ndarray) -> np.ndarray:
    """Sort every segment of outer in place; [n + 1] counts of distinct values (from 1)."""
    n = len(start) - 1
    unique = np.zeros(n + 1, np.int64)
    for u in numba.prange(n):
        s, t = start[u], start[u + 1]
        outer[s:t].sort()           # numba's quicksort (insertion sort below 16 entries)
        for a in range(s, t):
            unique[u + 1] += a == s or outer[a] != outer[a - 1]
    return unique


@pjit
def write_pairs(outer: np.ndarray, start: np.ndarray, offset: np.ndarray) -> np.ndarray:
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


@pjit
def _count_by_block(table: np.ndarray, rank: np.ndarray, keep: np.ndarray,
                    blocks: int) -> np.ndarray:
    """[blocks, n] kept pairs per inner hit u, from each block of consecutive table rows."""
    n, k = table.shape
    size = (n + blocks - 1) // blocks
    counts = np.zeros((blocks, n), np.int64)
    for b in numba.prange(blocks):
        for i in range(b * size, min(n, (b + 1) * size)):
            for c in range(k):
                if keep[i, c]:
                    j = table[i, c]
                    counts[b, i if rank[i] < rank[j] else j] += 1
    return counts


@pjit
def _segment_starts(counts: np.ndarray) -> np.ndarray:
    """Segment starts [n + 1]; ``counts`` becomes each block's write offset in every segment."""
    blocks, n = counts.shape
    start = np.zeros(n + 1, np.int64)
    for u in numba.prange(n):
        for b in range(blocks):
            start[u + 1] += counts[b, u]
    for u in range(n):
        start[u + 1] += start[u]
    for u in numba.prange(n):
        at = start[u]
        for b in range(blocks):
            size = counts[b, u]
            counts[b, u] = at
            at += size
    return start


@pjit
def _scatter_by_block(table: np.ndarray, rank: np.ndarray, keep: np.ndarray,
                      offsets: np.ndarray, outer: np.ndarray) -> None:
    """outer[segment of u] = the partners v of the kept pairs (u, v), block by block."""
    n, k = table.shape
    blocks = offsets.shape[0]
    size = (n + blocks - 1) // blocks
    for b in numba.prange(blocks):
        for i in range(b * size, min(n, (b + 1) * size)):
            for c in range(k):
                if keep[i, c]:
                    j = table[i, c]
                    u, v = (i, j) if rank[i] < rank[j] else (j, i)
                    outer[offsets[b, u]] = v
                    offsets[b, u] += 1


@njit
def sorted_pairs(table: np.ndarray, rank: np.ndarray, keep: np.ndarray,
                 blocks: int) -> np.ndarray:
    """[2, E] (inner, outer) of the kept proposals, sorted by inner then outer: a counting sort
    by inner hit, parallel over ``blocks`` ranges of table rows (each block counts and writes
    its own pairs; the sorted, de-duplicated segments do not depend on the blocks)."""
    counts = _count_by_block(table, rank, keep, max(1, blocks))
    start = _segment_starts(counts)
    outer = np.empty(start[-1], np.int64)
    _scatter_by_block(table, rank, keep, counts, outer)
    unique = sort_segments(outer, start)
    for u in range(len(start) - 1):
        unique[u + 1] += unique[u]
    return write_pairs(outer, start, unique)
