"""Layer swap: a track gives back a pixel layer's hits that are not its particle's, for the lone
hit that is.

The walk follows the GNN's best edge into each layer. Where a particle of low pT from another
vertex crosses the innermost pixel layer near a track, the walk can take its hit, and the
track's own hit on that layer is left alone: the extension (trkx.tracks.builder.extension)
gives a track at most one hit per layer it lacks, so it cannot mend it. Counted on the pixel
hits (the anchors' count, a real event's pixel truth) such a particle is lost: its track's
pixel part is half another particle's (docs/levers.md: 18 of the 33
lost 3-pixel-layer particles with a strip track of the realistic test events).

For a track ``t`` of >= ``min_hits`` hits and a layer ``L`` of ``volumes`` on which it holds
hits ``H``, the helix of ``t``'s other hits (trkx.tracks.fit.helix_fit, its line along the beam
weighted by the hits' resolutions, trkx.tracks.builder.extension.weighted_lines) gives each hit
``i`` on ``L`` the cost

    c_i = (e_i / window_xy)^2 + (dz_i / window_z)^2

of its residuals across and along the beam (extension's ``e, dz``). ``L`` is a candidate when
every held hit lies outside the windows (``min_{h in H} c_h > 1``) and a lone hit ``l`` of ``L``
inside (``c_l < 1``, ahead of the perigee; the cheapest). A fit that leaves a layer out is
itself pulled by the track's other wrong hits, so the candidate is judged on the whole track:
with ``chi2(T)`` the helix fit's ``chi2 / ndf`` of the hits ``T`` (resolutions of
trkx.tracks.fit.helix_fit), the swap is made when

    chi2_ratio * chi2((t \\ H) + l) < chi2(t).

Measured on the truth of 3 realistic test events (docs/levers.md):
candidates by the windows alone swap to the particle's own hit 26 times and away from it 38
times; with the refit at ``chi2_ratio`` 2, 20 times and 3 times.

The held hits ``H`` become lone (tracks of one hit each, new ids after ``labels.max()``) and
``l`` joins ``t``. A lone hit two candidates want goes to the one whose chi2 falls most (ratio
of the two fits). Deterministic: a function of the labels, positions and layers.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from trkx.data.detector import PIXEL_VOLUMES
from trkx.tracks.builder.extension import candidate_pairs, weighted_lines
from trkx.tracks.fit.helix_fit import fit_helices
from trkx.tracks.fit.helix_geometry import helix_geometry, helix_residuals

#: Tracks with fewer hits keep their layers: a fit without a layer needs the others.
SWAP_MIN_HITS = 5
#: mm (across, along the beam): the windows when the builder has no pixel windows of its own
#: (the shipped cells set's extension_pixel_xy / _z).
SWAP_WINDOWS = (1.0, 3.0)


def _fits_without_layer(labels: np.ndarray, size: np.ndarray, x: np.ndarray, y: np.ndarray,
                        z: np.ndarray, layer: np.ndarray, keys: np.ndarray, min_hits: int,
                        ) -> tuple[np.ndarray, np.ndarray, pd.DataFrame]:
    """For every layer of ``keys`` and track of >= ``min_hits`` hits holding hits on it, the
    helix of the track's other hits: one batched fit of the virtual tracks ``(layer, track)``
    (ordered by layer, then track; each one's hits in index order, as a fit of the track
    alone sees them). ``(layer, track, fit frame)`` of the virtual tracks the fit returns."""
    span = int(layer.max()) + 1
    eligible = size[labels] >= min_hits
    held = np.unique(labels[eligible] * span + layer[eligible])       # (track, layer) pairs
    held = held[np.isin(held % span, keys)]
    order = np.lexsort((held // span, held % span))
    tracks, layers = held[order] // span, held[order] % span
    by_label = np.argsort(labels, kind="stable")
    start = np.searchsorted(labels[by_label], tracks)
    length = np.searchsorted(labels[by_label], tracks, side="right") - start
    virtual = np.repeat(np.arange(len(tracks)), length)
    offset = np.arange(len(virtual)) - np.repeat(np.cumsum(length) - length, length)
    hits = by_label[np.repeat(start, length) + offset]
    other = layer[hits] != layers[virtual]
    hits, virtual = hits[other], virtual[other]
    frame = fit_helices(virtual, x[hits], y[hits], z[hits], layer[hits] // 1000).frame()
    rows = frame["track_id"].to_numpy(np.int64)
    return layers[rows], tracks[rows], frame


def _swap_candidates(labels: np.ndarray, size: np.ndarray, x: np.ndarray, y: np.ndarray,
                     z: np.ndarray, layer: np.ndarray, key: int,
                     windows: tuple[float, float], fits: pd.DataFrame,
                     ) -> tuple[np.ndarray, np.ndarray]:
    """On layer ``key``: the tracks (``size``: hits per track id) whose held hits lie outside
    ``windows`` of the helix of their other hits (``fits``, their rows of
    :func:`_fits_without_layer`, ``track_id`` the track's), and for each the cheapest lone hit
    inside (module docstring); ``(tracks, lone hits)``."""
    none = np.zeros(0, dtype=np.int64)
    on = layer == key
    frame = fits[fits["n_hits"].to_numpy() >= 3].reset_index(drop=True)
    if len(frame) == 0:
        return none, none
    ids = frame["track_id"].to_numpy(np.int64)
    geometry = helix_geometry(frame)
    row_of = np.full(len(size), -1, dtype=np.int64)
    row_of[ids] = np.arange(len(ids))
    in_ids = row_of[labels] >= 0
    held_members = np.flatnonzero(in_ids & ~on)
    rows = row_of[labels[held_members]]
    line = weighted_lines(geometry, rows, x[held_members], y[held_members], z[held_members],
                          layer[held_members] // 1000)
    usable = np.isfinite(line["z0"]) & np.isfinite(line["cot"])
    geometry = {**geometry, "z0": np.where(usable, line["z0"], geometry["z0"]),
                "cot": np.where(usable, line["cot"], geometry["cot"])}
    wxy, wz = windows

    held = np.flatnonzero(on & in_ids)
    held_rows = row_of[labels[held]]
    e, dz, _ = helix_residuals(geometry, held_rows, x[held], y[held], z[held])
    held_cost = np.full(len(ids), np.inf)
    np.minimum.at(held_cost, held_rows, (e / wxy) ** 2 + (dz / wz) ** 2)

    lone = np.flatnonzero(on & (size[labels] == 1))
    if len(lone) == 0:
        return none, none
    row, hit = candidate_pairs(geometry, x[lone], y[lone], z[lone], layer[lone], max(wxy, wz))
    e, dz, s = helix_residuals(geometry, row, x[lone[hit]], y[lone[hit]], z[lone[hit]])
    cost = (e / wxy) ** 2 + (dz / wz) ** 2
    inside = (cost < 1.0) & (s >= 0) & (held_cost[row] > 1.0)
    row, hit, cost = row[inside], lone[hit[inside]], cost[inside]
    order = np.lexsort((hit, cost, row))
    first = np.unique(row[order], return_index=True)[1]
    chosen = order[first]
    return ids[row[chosen]], hit[chosen]


def swap_layer_hits(labels: np.ndarray, pos: np.ndarray, layer: np.ndarray,
                    windows: tuple[float, float], chi2_ratio: float,
                    volumes: tuple[int, ...] = PIXEL_VOLUMES,
                    min_hits: int = SWAP_MIN_HITS) -> tuple[np.ndarray, np.ndarray]:
    """Track id of every hit after the swaps (module docstring), and the ids of the tracks
    that changed. ``pos = (r, phi, z)``, ``layer = volume_id * 1000 + layer_id``, ``windows
    = (window_xy, window_z)`` in mm, ``chi2_ratio >= 1``."""
    if chi2_ratio < 1.0:
        raise ValueError(f"chi2_ratio must be >= 1, got {chi2_ratio}")
    if min(windows) <= 0:
        raise ValueError(f"swap windows must be > 0, got {windows}")
    labels = np.asarray(labels, dtype=np.int64)
    none = np.zeros(0, dtype=np.int64)
    if len(labels) == 0:
        return labels, none
    layer = np.asarray(layer, dtype=np.int64)
    pos = np.asarray(pos, dtype=np.float64)
    x, y, z = pos[:, 0] * np.cos(pos[:, 1]), pos[:, 0] * np.sin(pos[:, 1]), pos[:, 2]
    size = np.bincount(labels)
    keys = np.unique(layer[np.isin(layer // 1000, volumes)])
    fit_layer, fit_track, fits = _fits_without_layer(labels, size, x, y, z, layer, keys,
                                                     min_hits)
    fits["track_id"] = fit_track
    found = [_swap_candidates(labels, size, x, y, z, layer, int(key), windows,
                              fits[fit_layer == key])
             for key in keys]
    tracks = np.concatenate([f[0] for f in found] or [none])
    lone = np.concatenate([f[1] for f in found] or [none])
    if len(tracks) == 0:
        return labels, none
    ratio = _chi2_gain(labels, x, y, z, layer, tracks, lone)
    take = ratio > chi2_ratio
    tracks, lone, ratio = tracks[take], lone[take], ratio[take]
    order = np.lexsort((tracks, -ratio))              # a lone hit to the track it helps most
    first = np.unique(lone[order], return_index=True)[1]
    tracks, lone = tracks[order[first]], lone[order[first]]
    out = labels.copy()
    span = int(layer.max()) + 1                                   # one key per (track, layer)
    given = np.flatnonzero(np.isin(labels * span + layer, tracks * span + layer[lone]))
    out[given] = labels.max() + 1 + np.arange(len(given))
    out[lone] = tracks
    return out, np.unique(tracks)


def _chi2_gain(labels: np.ndarray, x: np.ndarray, y: np.ndarray, z: np.ndarray,
               layer: np.ndarray, tracks: np.ndarray, lone: np.ndarray) -> np.ndarray:
    """Per candidate ``k``: ``chi2(track_k) / chi2(track_k without its hits on lone_k's layer,
    with lone_k)``, chi2 the helix fit's ``chi2 / ndf`` (a candidate per virtual track)."""
    k = np.arange(len(tracks))
    order = np.argsort(labels, kind="stable")
    start = np.searchsorted(labels[order], tracks)
    stop = np.searchsorted(labels[order], tracks, side="right")
    hits = [order[a:b] for a, b in zip(start, stop)]
    whole_id = np.repeat(k, [len(h) for h in hits])
    whole = np.concatenate(hits)
    swapped = [np.append(h[layer[h] != layer[j]], j) for h, j in zip(hits, lone)]
    swapped_id = np.repeat(k, [len(h) for h in swapped])
    swapped = np.concatenate(swapped)
    before = fit_helices(whole_id, x[whole], y[whole], z[whole], layer[whole] // 1000)
    after = fit_helices(swapped_id, x[swapped], y[swapped], z[swapped], layer[swapped] // 1000)
    ratio = before.chi2_ndf / np.maximum(after.chi2_ndf, 1e-12)   # a perfect swap: large
    return np.where(np.isfinite(ratio), ratio, 0.0)
