"""Stitching: join two track pieces of one particle that a missing edge split apart.

A graph that loses one edge of a particle's chain leaves the walk two pieces, each of at most
half its hits (both fail the double majority, both count as fakes). No edge joins them, so
the pieces are joined by their geometry. Hits at ``pos = (r, phi, z)``, ``x = r cos phi``,
``y = r sin phi``. For a piece ``A`` (>= 2 hits, ordered inner to outer by the graph's rank)
with last hits ``a', a`` and a piece ``B`` with first hits ``b, b'``, the link ``A -> B`` is a
candidate when

    rank(b) > rank(a),   |(x, y)_b - (x, y)_a| < max_gap,
    |(eta(a', a), cos phi_a, sin phi_a) - (eta(b, b'), cos phi_b, sin phi_b)| <= window,
    dk = |k(a', a, b) - k(a, b, b')| < max_curvature,
    dt = max(|t(a, b) - t(a', a)|, |t(b, b') - t(a, b)|) < max_angle,

with ``t(p, q) = atan2(r_q - r_p, z_q - z_p)`` the polar angle of the segment ``p -> q``,
``eta(p, q) = -log tan(t(p, q) / 2)`` its pseudorapidity, ``phi`` the hit's azimuth and
``k(p, q, s) = 2 ((q - p) x (s - p)) / (|q - p| |s - q| |p - s|)`` the signed curvature of the
circle through three hits in the transverse plane (1/mm): a helix keeps its curvature and
polar angle across the gap. The window compares the pieces' own directions, not the hits'
``asinh(z / r)`` seen from the origin, which changes along a particle whose vertex is far
along the beam (on the cells set's 8 validation events, stitching by the hits' ``asinh(z /
r)`` found 0.9007 of the signal particles at fake rate 0.0344, by the pieces' directions 0.9025
at 0.0337; docs/levers.md). Candidates are taken in order of the cost
``dk / max_curvature + dt / max_angle`` (ties: in the order of the ends, then of the
starts; the pairs within ``window`` come from the compiled ball search,
trkx.tracks.builder.ball_kernels), each piece's end and each piece's start at most once;
the accepted links form chains (rank grows along every link and within every piece, so no
cycle), and each chain becomes one track. Deterministic: a function of the labels, positions
and ranks.
"""

from __future__ import annotations

import numpy as np

from trkx.tracks.builder.ball_kernels import ball_pairs, grid_side
from trkx.tracks.builder.components import component_labels


def piece_ends(labels: np.ndarray, rank: np.ndarray, tracks: np.ndarray,
               layer: np.ndarray | None = None) -> tuple[np.ndarray, ...]:
    """First, second, second-to-last and last hit in rank order of each of ``tracks`` (ids
    of tracks with >= 2 hits, ascending). With hit ``layer`` keys the second hit is the first
    one on another layer than the first hit, and the second-to-last the last one on another
    layer than the last hit (where the piece has one): a layer's second hit, where two
    modules overlap, lies millimetres from the first, too close to give a direction or a
    curvature."""
    by_rank = np.empty(len(rank), dtype=np.int64)
    by_rank[rank] = np.arange(len(rank))
    member = np.zeros(int(labels.max()) + 1, dtype=bool)
    member[tracks] = True
    hits = by_rank[member[labels[by_rank]]]                  # pieces' hits, inner to outer
    hits = hits[np.argsort(labels[hits], kind="stable")]     # grouped by track, in rank order
    count = np.bincount(labels[hits], minlength=len(member))[tracks]
    start = np.concatenate([[0], np.cumsum(count)[:-1]])
    end = start + count - 1
    second, penult = start + 1, end - 1
    if layer is not None:
        position = np.arange(len(hits))
        group = np.repeat(np.arange(len(tracks)), count)
        hit_layer = np.asarray(layer)[hits]
        off_first = hit_layer != hit_layer[start][group]
        off_last = hit_layer != hit_layer[end][group]
        first_off = np.minimum.reduceat(np.where(off_first, position, len(hits)), start)
        last_off = np.maximum.reduceat(np.where(off_last, position, -1), start)
        second = np.where(first_off < len(hits), first_off, second)
        penult = np.where(last_off >= 0, last_off, penult)
    return hits[start], hits[second], hits[penult], hits[end]


def _curvature(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Signed curvature (1/mm) of the circle through the three points of rows 0, 1, 2."""
    cross = (x[1] - x[0]) * (y[2] - y[0]) - (y[1] - y[0]) * (x[2] - x[0])
    norm = (np.hypot(x[1] - x[0], y[1] - y[0]) * np.hypot(x[2] - x[1], y[2] - y[1])
            * np.hypot(x[0] - x[2], y[0] - y[2]))
    return 2.0 * cross / np.maximum(norm, 1e-9)


def _direction_eta(r0: np.ndarray, z0: np.ndarray, r1: np.ndarray, z1: np.ndarray) -> np.ndarray:
    """Pseudorapidity ``-log tan(t / 2)`` of the segment ``(r0, z0) -> (r1, z1)``, ``t`` its
    polar angle (a segment along the beam gets a large finite value)."""
    theta = np.clip(np.arctan2(r1 - r0, z1 - z0), 1e-6, np.pi - 1e-6)
    return -np.log(np.tan(theta / 2))


def stitch_pieces(labels: np.ndarray, pos: np.ndarray, rank: np.ndarray, window: float = 0.3,
                  max_gap: float = 350.0, max_curvature: float = 3e-4,
                  max_angle: float = 0.05, layer: np.ndarray | None = None) -> np.ndarray:
    """Track id of every hit after joining pieces (module docstring); ids are the chains'
    component labels (not compact). With the hits' ``layer`` keys each piece's second and
    second-to-last hits are on another layer than its ends (:func:`piece_ends`)."""
    labels = np.asarray(labels, dtype=np.int64)
    if len(labels) == 0:
        return labels
    count = np.bincount(labels)
    n_tracks = len(count)
    pieces = np.flatnonzero(count >= 2)
    if len(pieces) < 2:
        return labels
    rank = np.asarray(rank)
    ends = piece_ends(labels, rank, pieces, layer)       # first, second, penult, last [P]
    pos = np.asarray(pos, dtype=np.float64)
    r, phi, z = (np.stack([pos[h, c] for h in ends]) for c in range(3))   # [4, P] each
    x, y = r * np.cos(phi), r * np.sin(phi)
    end_key = np.stack([_direction_eta(r[2], z[2], r[3], z[3]), np.cos(phi[3]),
                        np.sin(phi[3])], axis=-1)                          # [P, 3]
    start_key = np.stack([_direction_eta(r[0], z[0], r[1], z[1]), np.cos(phi[0]),
                          np.sin(phi[0])], axis=-1)
    i, j = ball_pairs(end_key, np.full(len(end_key), float(window)),
                      *(np.ascontiguousarray(start_key[:, c]) for c in range(3)),
                      grid_side(start_key[:, 0], start_key[:, 1], window))  # end i, start j
    if len(i) == 0:
        return labels
    ok = (i != j) & (rank[ends[0][j]] > rank[ends[3][i]]) & (
        np.hypot(x[0, j] - x[3, i], y[0, j] - y[3, i]) < max_gap)
    i, j = i[ok], j[ok]
    # the four hits a', a, b, b' of every candidate: rows of (x, y, r, z)
    hx = np.stack([x[2, i], x[3, i], x[0, j], x[1, j]])
    hy = np.stack([y[2, i], y[3, i], y[0, j], y[1, j]])
    hr = np.stack([r[2, i], r[3, i], r[0, j], r[1, j]])
    hz = np.stack([z[2, i], z[3, i], z[0, j], z[1, j]])
    dk = np.abs(_curvature(hx[:3], hy[:3]) - _curvature(hx[1:], hy[1:]))
    t = np.arctan2(np.diff(hr, axis=0), np.diff(hz, axis=0))           # [3, C]
    dt = np.maximum(np.abs(t[1] - t[0]), np.abs(t[2] - t[1]))
    good = (dk < max_curvature) & (dt < max_angle)
    cost = dk[good] / max_curvature + dt[good] / max_angle
    a_track, b_track = pieces[i[good]], pieces[j[good]]
    links = _greedy_links(np.argsort(cost, kind="stable"), a_track, b_track, n_tracks)
    chain = component_labels(n_tracks, a_track[links], b_track[links])
    return chain[labels]


def _greedy_links(order: np.ndarray, a_track: np.ndarray, b_track: np.ndarray,
                  n_tracks: int) -> np.ndarray:
    """Indices of the candidates accepted in ``order``: each end and each start once."""
    end_used = np.zeros(n_tracks, dtype=bool)
    start_used = np.zeros(n_tracks, dtype=bool)
    accepted = []
    a_list, b_list = a_track.tolist(), b_track.tolist()
    for i in order.tolist():
        a, b = a_list[i], b_list[i]
        if end_used[a] or start_used[b]:
            continue
        end_used[a] = start_used[b] = True
        accepted.append(i)
    return np.asarray(accepted, dtype=np.int64)
