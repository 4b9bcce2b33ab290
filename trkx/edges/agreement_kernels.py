"""The edge agreements of trkx.edges.agreement, compiled (CPU; the math is there).

An entry is an edge at one of its hits. The entries are grouped by hit, inward before outward
(a counting sort), and for every hit each pair (inward entry e, outward entry f), a
continuation, is visited once: its disagreement d^2 for each cue lowers both entries' best.
The torch path (the GPU's) materialises the pairs in chunks, sorts and segment-reduces them;
here nothing is materialised: 0.09 s against the float32 torch enumeration's 0.32 s for the
beam-line cue on event 21001's filter graph (1.07M edges, 2 threads; both cues 0.09 against
0.64 s). Hits are independent (an entry belongs to one hit), so
they run in parallel with no shared writes.

Arithmetic: float64 from the float32 positions, as the torch path computes it, so the two agree
to the float32 rounding of g. The along-track cue's turn enters as sin(psi_f - psi_e) =
cos psi_e sin psi_f - sin psi_e cos psi_f with (cos psi, sin psi) = v / |v| ((1, 0) for a zero
v, as atan2(0, 0) = 0), the same value as the sine of the wrapped atan2 difference.
fastmath is off: no instruction-set dependence beyond libm's sqrt (exact) and cos/sin of the
hit positions.

Imported only when the agreements are computed on the CPU with numba importable.
"""

from __future__ import annotations

import math

import numba
import numpy as np

njit = numba.njit(cache=True, nogil=True, fastmath=False)
pjit = numba.njit(cache=True, nogil=True, parallel=True, fastmath=False)


@njit
def _group_entries(src: np.ndarray, dst: np.ndarray, r: np.ndarray, z: np.ndarray,
                   n_hits: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(order [2E], start [2N + 1], outward [2E]): entry k is edge k mod E at its source
    (k < E) or target; ``order`` lists the entries by key 2 hit + outward (stable), ``start``
    the first position of each key."""
    n_edges = len(src)
    outward = np.empty(2 * n_edges, np.bool_)
    start = np.zeros(2 * n_hits + 1, np.int64)
    for k in range(2 * n_edges):
        e = k % n_edges
        hit, other = (src[e], dst[e]) if k < n_edges else (dst[e], src[e])
        step = (r[other] - r[hit]) * r[hit] + (z[other] - z[hit]) * z[hit]
        outward[k] = step >= 0
        start[2 * hit + outward[k] + 1] += 1
    for key in range(2 * n_hits):
        start[key + 1] += start[key]
    fill = start[:-1].copy()
    order = np.empty(2 * n_edges, np.int64)
    for k in range(2 * n_edges):
        e = k % n_edges
        hit = src[e] if k < n_edges else dst[e]
        key = 2 * hit + outward[k]
        order[fill[key]] = k
        fill[key] += 1
    return order, start, outward


@pjit
def agreements(src: np.ndarray, dst: np.ndarray, pos: np.ndarray, trajectory: np.ndarray,
               beam_line: bool, along_track: bool, z0_scale: float, slope_scale: float,
               cot_scale: float, cot_clip: float, curvature_scale: float,
               clip: float) -> np.ndarray:
    """[E, 2 C] float64 g of each edge at its source and target, for the cues asked for in
    this order (beam line, along the track), from hits ``pos`` [N, 3] = (r, phi, z) float64 and
    the edges' (z0, phislope) ``trajectory`` [E, >= 2] float64 (trkx.edges.geometry's, read by
    the beam-line cue only)."""
    n_edges, n_hits = len(src), pos.shape[0]
    r, phi, z = pos[:, 0].copy(), pos[:, 1].copy(), pos[:, 2].copy()
    x, y = r * np.cos(phi), r * np.sin(phi)
    order, start, outward = _group_entries(src, dst, r, z, n_hits)
    cues = int(beam_line) + int(along_track)
    # per entry, at its sorted position (a hit's entries are then contiguous): beam line (z0,
    # phislope) scaled; along the track its dip scaled, v (oriented inner -> outer) and v's
    # direction (cos psi, sin psi)
    beam = np.zeros((2 * n_edges if beam_line else 0, 2), np.float64)
    along = np.zeros((2 * n_edges if along_track else 0, 5), np.float64)
    for a in numba.prange(2 * n_edges):
        k = order[a]
        e = k % n_edges
        hit, other = (src[e], dst[e]) if k < n_edges else (dst[e], src[e])
        if beam_line:       # the edge's trajectory (the same for both ends)
            beam[a, 0] = trajectory[e, 0] / z0_scale
            beam[a, 1] = trajectory[e, 1] / slope_scale
        if along_track:
            sign = 1.0 if outward[k] else -1.0
            vx, vy = (x[other] - x[hit]) * sign, (y[other] - y[hit]) * sign
            vz = (z[other] - z[hit]) * sign
            length = math.sqrt(vx * vx + vy * vy)
            dip = vz / max(length, 1e-3)
            along[a, 0] = min(max(dip, -cot_clip), cot_clip) / cot_scale
            along[a, 1], along[a, 2] = vx, vy
            along[a, 3], along[a, 4] = (vx / length, vy / length) if length > 0 else (1.0, 0.0)
    best = np.full((2 * n_edges, cues), clip * clip)
    for hit in numba.prange(n_hits):
        for e in range(start[2 * hit], start[2 * hit + 1]):          # inward entries
            for f in range(start[2 * hit + 1], start[2 * hit + 2]):  # outward entries
                c = 0
                if beam_line:
                    d2 = (beam[e, 0] - beam[f, 0]) ** 2 + (beam[e, 1] - beam[f, 1]) ** 2
                    best[e, c] = min(best[e, c], d2)
                    best[f, c] = min(best[f, c], d2)
                    c += 1
                if along_track:
                    turn = along[e, 3] * along[f, 4] - along[e, 4] * along[f, 3]   # sin
                    chord = math.sqrt((along[e, 1] + along[f, 1]) ** 2
                                      + (along[e, 2] + along[f, 2]) ** 2)
                    kappa = 2.0 * turn / max(chord, 1e-3)
                    d2 = (along[e, 0] - along[f, 0]) ** 2 + (kappa / curvature_scale) ** 2
                    best[e, c] = min(best[e, c], d2)
                    best[f, c] = min(best[f, c], d2)
    out = np.empty((n_edges, 2 * cues), np.float64)
    for a in numba.prange(2 * n_edges):
        k = order[a]
        column = 0 if k < n_edges else 1
        for c in range(cues):
            out[k % n_edges, 2 * c + column] = math.sqrt(min(best[a, c], clip * clip)) / clip
    return out
