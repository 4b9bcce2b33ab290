"""What a short track knows beyond its own helix fit: its pT through the beam line, and whether
its helix goes on into hits that are not its own.

Most candidates of 3-7 hits are pure pieces of longer particles below the signal threshold
(1,309 of 1,520 3-hit candidates of the validation events, 92% below
1 GeV), which every input of the track itself calls real. Two inputs tell them apart:

- **The beam-line pT.** A 3-hit arc is short (in an endcap its hits lie a few cm apart in
  ``r``), so its free circle's radius is loose. The circle through the origin,

      x^2 + y^2 = 2 a x + 2 b y,      (a, b) = argmin sum_i (x_i^2 + y_i^2 - 2 a x_i - 2 b y_i)^2

  (linear least squares per track: ``[[Sxx, Sxy], [Sxy, Syy]] [2a, 2b] = [Sxq, Syq]``, sums
  over the track's hits, ``q = x^2 + y^2``) has the lever arm from the beam line to the last
  hit, and ``pT_bl = 0.299792458e-3 |B| sqrt(a^2 + b^2)`` GeV is that of a prompt particle. A
  secondary's is wrong, and the model keeps its free pT and ``|d0|`` beside it.
- **The continuation.** A piece's particle goes on: beyond the piece's last hit (``ahead``)
  and between the beam line and its first hit (``behind``), its helix
  (trkx.tracks.builder.extension:
  ``e, dz, s``) passes through hits of other tracks or lone ones. Counted per track: the
  distinct layers, not its own, with a hit ``j`` not of the track within ``|e_tj| <
  window_xy`` and ``|dz_tj| < window_z``, at path length ``s_tj > s_max`` (ahead) or ``0 <
  s_tj < s_min`` (behind), ``s_min, s_max`` the track's own hits' range, looked up within
  ``reach`` mm of path along the helix. A particle that ends (in the material, at the
  detector's edge) leaves none.

On the shipped cells set's 8 validation events (candidates of 3-7 hits at the walk cut,
two-fold by event, the anchors' count), at the fakes the short-track model keeps today (443),
these inputs keep 717 signal short tracks against 664 (3 hits: 51 against 26):
docs/levers.md. The continuation is counted only for tracks of fewer
than :data:`CONTINUATION_MAX_HITS` hits (the short-track model's candidates: the tuner's
longest length), 0 for longer ones. Deterministic; compiled, parallel over tracks, the hits
found by a grid in the transverse plane (trkx.tracks.fit.continuation_kernels), with the k-d
tree query of the sampled helix points against the hits as its reference (2x slower).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from trkx.runtime.device import numba_importable
from trkx.tracks.fit.helix_fit import FIELD_TESLA, PT_PER_TESLA_MM
from trkx.tracks.fit.helix_geometry import helix_geometry, helix_residuals

#: Tracks shorter than this get a continuation count (the tuner's longest minimum length).
CONTINUATION_MAX_HITS = 8
#: mm: transverse and longitudinal windows around the helix (a long strip's z is known to
#: its 10.4 mm pitch / sqrt(12), and a short arc's extrapolation drifts by millimetres).
WINDOW_XY = 3.0
WINDOW_Z = 10.0
#: mm of path along the helix looked through, and the spacing of the looked-up points.
REACH = 400.0
STEP = 8.0


def beamline_pt(inverse: np.ndarray, n_tracks: int, x: np.ndarray, y: np.ndarray,
                field: float = FIELD_TESLA) -> np.ndarray:
    """Per track (``inverse``: each hit's track row), the pT (GeV) of the circle through the
    origin fitted to its hits (module docstring); 1e3 GeV where the hits lie on a line
    through the origin."""
    q = x * x + y * y
    sxx, sxy, syy, sxq, syq = (np.bincount(inverse, w, n_tracks) for w in (
        x * x, x * y, y * y, x * q, y * q))
    det = sxx * syy - sxy * sxy
    with np.errstate(divide="ignore", invalid="ignore"):
        radius = 0.5 * np.hypot(sxq * syy - syq * sxy, syq * sxx - sxq * sxy) / det
    pt = PT_PER_TESLA_MM * abs(field) * radius
    return np.where(np.isfinite(pt) & (pt < 1e3), pt, 1e3)


#: The continuation runs compiled (trkx.tracks.fit.continuation_kernels) where numba is
#: importable; the tests set it False to compare with the k-d tree version, its reference.
COMPILED_CONTINUATION = numba_importable()


def continuation(labels: np.ndarray, pos: np.ndarray, layer: np.ndarray,
                 helices: pd.DataFrame, window_xy: float = WINDOW_XY,
                 window_z: float = WINDOW_Z, reach: float = REACH,
                 step: float = STEP) -> tuple[np.ndarray, np.ndarray]:
    """Per row of ``helices`` (trkx.tracks.builder.extension.HELIX_COLUMNS; its ``track_id`` are ids
    of
    ``labels``), the layers ``ahead`` and ``behind`` its hits where its helix meets a hit that
    is not its own (module docstring). ``pos`` [N, 3] = (r, phi, z), ``layer`` the layer key."""
    n = len(helices)
    ahead, behind = np.zeros(n, np.int64), np.zeros(n, np.int64)
    if n == 0:
        return ahead, behind
    x, y, z = pos[:, 0] * np.cos(pos[:, 1]), pos[:, 0] * np.sin(pos[:, 1]), pos[:, 2]
    ids = helices["track_id"].to_numpy(np.int64)
    order = np.argsort(ids)
    geometry = helix_geometry(helices)
    row_of = np.searchsorted(ids, labels, sorter=order).clip(0, n - 1)
    row_of = order[row_of]
    own = ids[row_of] == labels
    rows = row_of[own]
    _, _, s_own = helix_residuals(geometry, rows, x[own], y[own], z[own])
    s_min, s_max = np.full(n, np.inf), np.full(n, -np.inf)
    np.minimum.at(s_min, rows, s_own)
    np.maximum.at(s_max, rows, s_own)
    fitted = np.isfinite(s_min) & np.isfinite(geometry["radius"]) & np.isfinite(geometry["cot"])
    own_layers = np.unique(rows * 100_000 + layer[own])
    if COMPILED_CONTINUATION:
        from trkx.tracks.fit.continuation_kernels import continuation_counts

        return continuation_counts(
            *(np.ascontiguousarray(v, np.float64) for v in (x, y, z)),
            np.ascontiguousarray(labels, np.int64), np.ascontiguousarray(layer, np.int64),
            ids, *(np.ascontiguousarray(geometry[k], np.float64) for k in (
                "a", "b", "radius", "sense", "alpha0", "z0", "cot")),
            s_min, s_max, fitted, own_layers.astype(np.int64), float(window_xy),
            float(window_z), float(reach), float(step), float(max(window_z, step)), 100_000)
    from scipy.spatial import cKDTree  # the reference: imported only when it runs

    hits = cKDTree(np.stack([x, y, z], axis=1))
    steps = np.arange(0.0, reach, step)
    for out, start, stop, beyond in (
            (ahead, s_max + step, s_max + reach, True),
            (behind, np.full(n, step), s_min - step, False)):
        path = start[:, None] + steps[None, :]
        valid = (path <= stop[:, None]) & fitted[:, None]
        track = np.broadcast_to(np.arange(n)[:, None], path.shape)[valid]
        path = path[valid]
        if len(path) == 0:
            continue
        angle = geometry["alpha0"][track] + geometry["sense"][track] * path / \
            geometry["radius"][track]
        points = np.stack([geometry["a"][track] + geometry["radius"][track] * np.cos(angle),
                           geometry["b"][track] + geometry["radius"][track] * np.sin(angle),
                           geometry["z0"][track] + geometry["cot"][track] * path], axis=1)
        near = cKDTree(points).sparse_distance_matrix(hits, max(window_z, step),
                                                      output_type="ndarray")
        pair = np.unique(track[near["i"]].astype(np.int64) * len(x) + near["j"])
        t, j = pair // len(x), pair % len(x)
        e, dz, s = helix_residuals(geometry, t, x[j], y[j], z[j])
        met = (np.abs(e) < window_xy) & (np.abs(dz) < window_z) & (labels[j] != ids[t])
        met &= (s > s_max[t]) if beyond else ((s > 0) & (s < s_min[t]))
        keys = np.unique(t[met] * 100_000 + layer[j[met]])
        keys = keys[~np.isin(keys, own_layers)]
        out += np.bincount(keys // 100_000, minlength=n)
    return ahead, behind
