"""Extension: a built track takes the lone hits that lie on its helix, on layers it lacks.

A graph that misses a particle's edges into the pixel layers (a skipped layer, a vertex far
along the beam, a short piece the builder dissolved) leaves those hits alone: tracks of one
hit, never candidates. Counted on the pixel hits alone (the anchors' count, a real event's
pixel truth), such a particle is lost although its track was found in the outer layers. The
track knows where its pixel hits are: on its helix.

For a track ``t`` with fitted helix (trkx.tracks.fit.helix_fit: circle centre ``c_t = (a_t,
b_t)``, radius ``R_t``, turning sense ``h_t``, angle ``alpha0_t`` of the perigee around
``c_t``, line ``z = z0_t + s cot(theta_t)``), a lone hit ``i`` at ``(x_i, y_i, z_i)`` has

    e_ti  = |(x_i, y_i) - c_t| - R_t                                (transverse, mm)
    s_ti  = h_t R_t wrap(atan2(y_i - b_t, x_i - a_t) - alpha0_t)    (path length, mm)
    dz_ti = z_i - z0_t - s_ti cot(theta_t)                          (along the beam, mm)

and is a candidate of ``t`` when ``|e_ti| < window_xy``, ``|dz_ti| < window_z``, ``s_ti >=
0`` (ahead of the perigee) and ``t`` has no hit on the layer of ``i``; its cost is ``(e_ti /
window_xy)^2 + (dz_ti / window_z)^2``.

A particle crossing a layer where two of its modules overlap leaves two hits on it, and the
graph (edges between layers) joins only one of them into its track. With ``overlap =
(overlap_xy, overlap_z)``, a lone hit ``i`` within the windows above on a layer where ``t``
holds one hit ``h`` joins ``t`` when

    |e_ti - e_th| < overlap_xy   and   |dz_ti - dz_th| < overlap_z

(the fit's extrapolation error is common to two hits millimetres apart on one layer, so the
residuals of the true second hit differ from the held one's by the hits' resolution; a stray
hit's anywhere in the windows), at cost ``((e_ti - e_th) / overlap_xy)^2 + ((dz_ti - dz_th) /
overlap_z)^2``. Each lone hit goes to its cheapest track; of the hits a
track receives on one layer, the cheapest stays (a track gains at most one hit per layer).
Candidates are the lone hits (of ``volumes`` when given, else of every volume) and the tracks
of >= ``min_hits`` hits with a fitted helix. With ``pixel_windows = (pixel_xy, pixel_z)`` a lone
hit of the pixel volumes (trkx.data.detector.PIXEL_VOLUMES) is judged, and costed, by those
windows in place of ``window_xy, window_z``: the pixels measure to ~0.015 mm, so a window the
strips need holds other particles' pixel hits.

With ``weighted_z``, each track's line along the beam is fitted again to its own hits
``i`` (path length ``s_i`` on its circle) with weights ``w_i = 1 / sigma_i^2``,

    sigma_i^2 = sigma_z,i^2 + (sigma_r,i cot)^2 + floor^2        (trkx.tracks.fit.helix_fit's
                                                                  resolutions; floor 0.1 mm)
    (z0, cot) = argmin sum_i w_i (z_i - z0 - s_i cot)^2,
    cov(z0, cot) = [[S_w, S_ws], [S_ws, S_wss]]^-1,   S_w = sum w_i, S_ws = sum w_i s_i, ...

and ``dz_ti`` (and the layer crossings) use that line: the helix fit weighs every hit alike in
z, so a track of strips, whose z is known only to the strip's length (a long strip: 3 mm),
misses its inner pixel hits along the beam, while one pixel hit of it (0.016 mm) pins the
weighted line.

The search, per layer of the lone hits: each helix's first crossing ahead of its perigee of
the layer's cylinder (barrel: the median ``r`` of its hits) or plane (endcap: their median
``z``), and the layer's hits within ``max(window_xy, window_z)`` of it plus the layer's depth
(its hits' largest distance from that level) stretched along the helix's slope; the exact
residuals above decide. Deterministic: a function of the labels, positions and fits.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from trkx.data.detector import PIXEL_VOLUMES
from trkx.tracks.builder.ball_kernels import ball_pairs, grid_side
from trkx.tracks.fit.helix_fit import BARREL_VOLUMES, hit_resolutions
from trkx.tracks.fit.helix_geometry import helix_geometry, helix_residuals

#: The helix columns :func:`extend_tracks` reads (a track table or HelixFit.frame()).
HELIX_COLUMNS = ("track_id", "pt", "eta", "phi", "d0", "z0", "charge")
#: mm: the z scatter the weighted line adds to every hit's resolution (multiple scattering).
Z_SCATTER_FLOOR = 0.1


def _layer_crossings(geometry: dict[str, np.ndarray], barrel: bool, level: float,
                     ) -> tuple[np.ndarray, np.ndarray]:
    """Where each helix first crosses a layer ahead of its perigee: the cylinder ``r = level``
    (``barrel``) or the plane ``z = level``; ``[C, 3]`` points and the rows of the helices
    that cross it."""
    a, b, radius, sense, alpha0, z0, cot = (geometry[k] for k in (
        "a", "b", "radius", "sense", "alpha0", "z0", "cot"))
    if barrel:      # circle |p| = level against the helix's circle: two points p+-
        d = np.maximum(np.hypot(a, b), 1e-9)
        along = (d * d + level * level - radius * radius) / (2 * d)
        across = np.sqrt(np.maximum(level * level - along * along, 0.0))
        crosses = np.abs(along) <= level
        ux, uy = a / d, b / d
        best = np.full(len(a), np.inf)
        for sign in (1.0, -1.0):
            px, py = along * ux - sign * across * uy, along * uy + sign * across * ux
            turn = np.arctan2(py - b, px - a) - alpha0
            s = sense * radius * ((turn + np.pi) % (2 * np.pi) - np.pi)
            best = np.where((s >= 0) & (s < best), s, best)
        s = best
        crosses &= np.isfinite(s)
    else:
        with np.errstate(divide="ignore", invalid="ignore"):
            s = (level - z0) / cot
        crosses = np.isfinite(s) & (s >= 0) & (s <= np.pi * radius)
    rows = np.flatnonzero(crosses)
    s = s[rows]
    angle = alpha0[rows] + sense[rows] * s / radius[rows]
    points = np.stack([a[rows] + radius[rows] * np.cos(angle),
                       b[rows] + radius[rows] * np.sin(angle), z0[rows] + cot[rows] * s], 1)
    return points, rows


def weighted_lines(geometry: dict[str, np.ndarray], rows: np.ndarray, x: np.ndarray,
                   y: np.ndarray, z: np.ndarray, volume: np.ndarray,
                   floor: float = Z_SCATTER_FLOOR) -> dict[str, np.ndarray]:
    """Per helix row, the line ``z = z0 + s cot`` fitted to its hits ``(x, y, z)`` (row
    ``rows[i]`` holds hit ``i``) weighted by ``1 / sigma_i^2``, ``sigma_i^2 = sigma_z,i^2 +
    (sigma_r,i cot)^2 + floor^2`` (trkx.tracks.fit.helix_fit.hit_resolutions; ``floor``: the
    scattering the resolutions leave out), and its covariance: ``z0, cot, var_z0, cov,
    var_cot`` (NaN where fewer than 2 hits). A line of strips, whose z is known only to the
    strip's length, is loose; one pixel hit pins it (module docstring)."""
    s = helix_residuals(geometry, rows, x, y, z)[2]
    _, sigma_z, sigma_r = hit_resolutions(volume)
    w = 1.0 / (sigma_z ** 2 + (sigma_r * geometry["cot"][rows]) ** 2 + floor ** 2)
    n = len(geometry["z0"])
    sw, sws, swss, swz, swsz = (np.bincount(rows, weights=v, minlength=n)
                                for v in (w, w * s, w * s * s, w * z, w * s * z))
    det = sw * swss - sws * sws
    ok = (np.bincount(rows, minlength=n) >= 2) & (det > 1e-12 * np.maximum(sw * swss, 1e-300))
    det = np.where(ok, det, np.nan)
    return {"z0": (swss * swz - sws * swsz) / det, "cot": (sw * swsz - sws * swz) / det,
            "var_z0": swss / det, "cov": -sws / det, "var_cot": sw / det}


def _weighted_geometry(geometry: dict[str, np.ndarray], labels: np.ndarray, pos: np.ndarray,
                       layer: np.ndarray, track_ids: np.ndarray) -> dict[str, np.ndarray]:
    """``geometry`` with each helix's line replaced by :func:`weighted_lines`' fit to the
    hits of its track (``track_ids[row]`` in ``labels``) where that fit exists."""
    row_of = np.full(int(labels.max()) + 1, -1, dtype=np.int64)
    row_of[track_ids] = np.arange(len(track_ids))
    held = np.flatnonzero(row_of[labels] >= 0)
    r, phi = pos[held, 0], pos[held, 1]
    line = weighted_lines(geometry, row_of[labels[held]], r * np.cos(phi), r * np.sin(phi),
                          pos[held, 2], layer[held] // 1000)
    fitted = np.isfinite(line["z0"]) & np.isfinite(line["cot"])
    return {**geometry, "z0": np.where(fitted, line["z0"], geometry["z0"]),
            "cot": np.where(fitted, line["cot"], geometry["cot"])}


def candidate_pairs(geometry: dict[str, np.ndarray], x: np.ndarray, y: np.ndarray,
                    z: np.ndarray, layer: np.ndarray, reach: float,
                    ) -> tuple[np.ndarray, np.ndarray]:
    """(helix row, lone hit) pairs to test: per layer of the lone hits, each helix's crossing
    of the layer's cylinder (barrel: its median r) or plane (its median z), paired with the
    layer's hits within ``reach`` plus the layer's depth (the spread of its hits' r or z
    about that level) stretched along the helix's slope (the compiled search of
    trkx.tracks.builder.ball_kernels); per layer, ordered by helix row then hit."""
    cot = np.abs(geometry["cot"])
    tracks, hits = [], []
    r = np.hypot(x, y)
    for key in np.unique(layer):
        on = np.flatnonzero(layer == key)
        barrel = int(key // 1000) in BARREL_VOLUMES
        coordinate = r[on] if barrel else z[on]
        level = float(np.median(coordinate))
        depth = float(np.abs(coordinate - level).max())
        points, rows = _layer_crossings(geometry, barrel, level)
        if len(rows) == 0:
            continue
        slope = np.sqrt(1 + cot[rows] ** 2) if barrel else np.sqrt(1 + 1 / np.maximum(
            cot[rows], 1e-9) ** 2)
        lx, ly, lz, radii = x[on], y[on], z[on], reach + depth * slope
        query, found = ball_pairs(np.ascontiguousarray(points), radii, lx, ly, lz,
                                  grid_side(lx, ly, float(np.median(radii))))
        if len(found):
            tracks.append(rows[query])
            hits.append(on[found])
    if not tracks:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(tracks), np.concatenate(hits)


def _held_hits(labels: np.ndarray, layer: np.ndarray, tracks: np.ndarray, layers: np.ndarray,
                ) -> tuple[np.ndarray, np.ndarray]:
    """For each ``(tracks[k], layers[k])``: how many hits of ``labels`` that track holds on
    that layer, and the index of one of them (-1 when it holds none)."""
    span = int(layer.max()) + 1      # one key per (track, layer); layers are among layer
    owned, first, held = np.unique(labels * span + layer, return_index=True, return_counts=True)
    key = tracks * span + layers
    where = np.minimum(np.searchsorted(owned, key), len(owned) - 1)
    found = owned[where] == key
    return np.where(found, held[where], 0), np.where(found, first[where], -1)


def extend_tracks(labels: np.ndarray, pos: np.ndarray, layer: np.ndarray,
                  helices: pd.DataFrame, window_xy: float, window_z: float,
                  volumes: tuple[int, ...] | None = None, min_hits: int = 4,
                  overlap: tuple[float, float] | None = None,
                  pixel_windows: tuple[float, float] | None = None,
                  weighted_z: bool = False,
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Track id of every hit after extension (module docstring), and the ids of the tracks
    that gained hits. ``pos = (r, phi, z)``, ``layer = volume_id * 1000 + layer_id``,
    ``helices`` the fits of the tracks (:data:`HELIX_COLUMNS`; rows of tracks that are not
    in ``labels`` or have NaN parameters are ignored); ``overlap = (overlap_xy, overlap_z)``
    (mm): a layer's second hit joins too (module docstring; None: never); ``pixel_windows =
    (pixel_xy, pixel_z)`` (mm): the pixel hits' windows (None: ``window_xy, window_z``)."""
    if overlap is not None and min(overlap) <= 0:
        raise ValueError(f"overlap windows must be > 0, got {overlap}")
    if pixel_windows is not None and min(pixel_windows) <= 0:
        raise ValueError(f"pixel windows must be > 0, got {pixel_windows}")
    labels = np.asarray(labels, dtype=np.int64)
    none = np.zeros(0, dtype=np.int64)
    if len(labels) == 0 or len(helices) == 0:
        return labels, none
    size = np.bincount(labels)
    layer = np.asarray(layer, dtype=np.int64)
    lone = size[labels] == 1
    if volumes is not None:
        lone &= np.isin(layer // 1000, volumes)
    lone = np.flatnonzero(lone)
    fitted = helices[list(HELIX_COLUMNS)].dropna()
    ids = fitted["track_id"].to_numpy(np.int64)
    fitted = fitted[(ids < len(size)) & (size[np.clip(ids, 0, len(size) - 1)] >= min_hits)]
    if len(lone) == 0 or len(fitted) == 0:
        return labels, none
    track_ids = fitted["track_id"].to_numpy(np.int64)
    geometry = helix_geometry(fitted)
    pos = np.asarray(pos, dtype=np.float64)
    if weighted_z:
        geometry = _weighted_geometry(geometry, labels, pos, layer, track_ids)
    r, phi, z = pos[lone, 0], pos[lone, 1], pos[lone, 2]
    x, y = r * np.cos(phi), r * np.sin(phi)
    reach = max(window_xy, window_z, *(pixel_windows or ()))
    track, hit = candidate_pairs(geometry, x, y, z, layer[lone], reach)
    if len(track) == 0:
        return labels, none
    e, dz, s = helix_residuals(geometry, track, x[hit], y[hit], z[hit])
    hit_layer = layer[lone[hit]]
    wxy, wz = np.full(len(hit), float(window_xy)), np.full(len(hit), float(window_z))
    if pixel_windows is not None:
        pixel = np.isin(hit_layer // 1000, PIXEL_VOLUMES)
        wxy[pixel], wz[pixel] = pixel_windows
    holds, held = _held_hits(labels, layer, track_ids[track], hit_layer)
    near = (np.abs(e) < wxy) & (np.abs(dz) < wz) & (s >= 0)
    ok = near & (holds == 0)
    cost = (e / wxy) ** 2 + (dz / wz) ** 2
    if overlap is not None:      # a second hit, judged against the one the track holds
        second = np.flatnonzero(near & (holds == 1))
        h = held[second]
        held_e, held_dz, _ = helix_residuals(geometry, track[second],
                                             pos[h, 0] * np.cos(pos[h, 1]),
                                             pos[h, 0] * np.sin(pos[h, 1]), pos[h, 2])
        de, ddz = e[second] - held_e, dz[second] - held_dz
        close = (np.abs(de) < overlap[0]) & (np.abs(ddz) < overlap[1])
        ok[second[close]] = True
        cost[second] = (de / overlap[0]) ** 2 + (ddz / overlap[1]) ** 2
    track, hit, hit_layer, cost = track[ok], hit[ok], hit_layer[ok], cost[ok]
    span = int(layer.max()) + 1                                    # one key per (track, layer)
    order = np.lexsort((hit, track, cost))
    _, best = np.unique(hit[order], return_index=True)            # each hit: its best track
    chosen = order[best]
    chosen = chosen[np.lexsort((hit[chosen], track[chosen], cost[chosen]))]
    _, best = np.unique(track[chosen] * span + hit_layer[chosen], return_index=True)
    chosen = chosen[best]                                          # each track: a hit per layer
    out = labels.copy()
    out[lone[hit[chosen]]] = track_ids[track[chosen]]
    return out, np.unique(track_ids[track[chosen]])
