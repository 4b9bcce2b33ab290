"""Track parameters from a helix fit of each track's hits: pT, eta, phi, d0, z0, charge, chi2.

A charged particle in a uniform field ``B`` along z moves on a helix: a circle in the
transverse plane and a straight line in ``(s, z)``, with ``s`` the transverse path length
(trkx.data.simulate.helix). Every track is fitted in two steps, vectorised over all tracks at
once (sums per track by ``np.bincount``, no Python loop per track):

1. **Circle** ``(x - a)^2 + (y - b)^2 = R^2``: the algebraic (Kasa) fit, linear in
   ``(D, E, F)`` of ``x^2 + y^2 + D x + E y + F = 0`` on coordinates centred on the track's
   mean, then ``GAUSS_NEWTON_STEPS`` Gauss-Newton steps on the geometric residuals

       e_i = sqrt((x_i - a)^2 + (y_i - b)^2) - R,

   which remove the algebraic fit's bias on short arcs. The steps are weighted (iteratively
   reweighted least squares): each hit by the inverse variance of its residual, the fine
   pitch and, in an endcap, the coarse radial pitch projected onto the circle's normal
   (``sigma_i^2 = sigma_fine^2 + (sigma_r cos beta_i)^2``, ``beta_i`` between the hit's
   radial direction and the normal), times a Cauchy weight ``1 / (1 + (e_i / c)^2)``,
   ``c = OUTLIER_SCALE`` (0.5 mm), so that a wrong or noise hit tens of mm off the circle does
   not bend it. ``R`` is capped at :data:`MAX_RADIUS`: a straight line through the hits'
   principal direction is taken instead when its robust loss
   ``sum_i (sigma_0 / sigma_i)^2 log(1 + (e_i / c)^2)`` is the smaller.
2. **Line** ``z = z0 + s cot(theta)``: least squares of the hits' ``z`` on their path length
   ``s_i = h R wrap(alpha_i - alpha_0)`` from the point of closest approach to the beam line,
   ``alpha`` the angle around the circle's centre and ``h`` the turning sense.

From the two fits, with ``c = (a, b)``:

    pT     = 0.299792458 |B| R / 1000                       [GeV, B in T, R in mm]
    h      = sign of the turn from the track's innermost to its outermost hit (+1 anticlockwise)
    charge = -h sign(B)                     (positive charges turn clockwise when B > 0)
    p0     = c (1 - R / |c|)                                (closest approach to the beam line)
    t      = h z_hat x (p0 - c) / R = (cos phi, sin phi)     (direction there)
    d0     = t_x p0_y - t_y p0_x                          (the perigee convention's sign)
    eta    = asinh(cot theta)

The fit quality is ``chi2 / ndf`` with ``ndf = 2 n - 5``,

    chi2 = sum_i (e_i / sigma_xy,i)^2 + ((z_i - z0 - s_i cot theta) / sigma_z,i)^2,

and per-hit resolutions from the hit's detector volume (:func:`hit_resolutions`): the cell
pitch / sqrt(12) of the TrackML modules, where an endcap's coarse direction is radial and
enters the z residual as ``sigma_r |cot theta|``. Multiple scattering is not modelled, so a
real low-pT track has chi2 / ndf above 1; the figure ranks tracks, it is no probability.
Tracks with fewer than 3 hits get NaN parameters.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from trkx.runtime.device import numba_importable

#: ``pT [GeV] = PT_PER_TESLA_MM * |B| [T] * R [mm]``.
PT_PER_TESLA_MM = 0.299792458e-3
#: The TrackML solenoid (fits to real truth give 1.98 T).
FIELD_TESLA = 2.0
#: Largest circle radius (mm): a straight track.
MAX_RADIUS = 1.0e7
GAUSS_NEWTON_STEPS = 6
#: mm: a hit this far off the circle weighs half as much (the Cauchy weight of the fit).
OUTLIER_SCALE = 0.5

# volume -> (sigma of the precise transverse coordinate, sigma of the coarse one) in mm, from
# the module pitches of detectors.csv (pitch / sqrt(12)); the coarse one is z in the barrels
# (8, 13, 17) and r in the endcaps.
_PITCH = {7: (0.050, 0.056), 8: (0.050, 0.056), 9: (0.050, 0.056),
          12: (0.080, 1.2), 13: (0.080, 1.2), 14: (0.080, 1.2),
          16: (0.12, 10.4), 17: (0.12, 10.4), 18: (0.12, 10.4)}
BARREL_VOLUMES = (8, 13, 17)
#: mm: the pixel's fine resolution, the unit of the circle fit's weights.
PIXEL_SIGMA = _PITCH[8][0] / np.sqrt(12.0)


def _resolution_table() -> np.ndarray:
    """``[3, V]``: ``(sigma_xy, sigma_z, sigma_r)`` of volume ids ``0 .. V - 1`` (module
    docstring); an unknown volume (and id 0) gets the pixel barrel's."""
    size = max(_PITCH) + 1
    fine, coarse = np.full(size, _PITCH[8][0]), np.full(size, _PITCH[8][1])
    barrel = np.ones(size, dtype=bool)
    for volume, (u, v) in _PITCH.items():
        fine[volume], coarse[volume] = u, v
        barrel[volume] = volume in BARREL_VOLUMES
    fine, coarse = fine / np.sqrt(12.0), coarse / np.sqrt(12.0)
    return np.stack([fine, np.where(barrel, coarse, 0.0), np.where(barrel, 0.0, coarse)])


_RESOLUTIONS = _resolution_table()


def hit_resolutions(volume_id: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per hit ``(sigma_xy, sigma_z, sigma_r)`` in mm from its volume (module docstring);
    unknown volumes get the pixel values."""
    volume_id = np.asarray(volume_id, dtype=np.int64)
    known = (volume_id >= 0) & (volume_id < _RESOLUTIONS.shape[1])
    sigma_xy, sigma_z, sigma_r = _RESOLUTIONS[:, np.where(known, volume_id, 0)]
    return sigma_xy, sigma_z, sigma_r


@dataclass(frozen=True, eq=False)
class HelixFit:
    """Per-track fit results (arrays of length T, the number of tracks) and per-hit residuals."""

    track_id: np.ndarray      # the track ids, ascending
    n_hits: np.ndarray
    pt: np.ndarray            # GeV
    eta: np.ndarray
    phi: np.ndarray           # rad, direction at the closest approach
    d0: np.ndarray            # mm, signed
    z0: np.ndarray            # mm
    charge: np.ndarray        # +1 / -1 (0 when not fitted)
    chi2_ndf: np.ndarray
    rms_xy: np.ndarray        # mm, RMS of the circle residuals
    rms_z: np.ndarray         # mm, RMS of the line residuals
    radius: np.ndarray        # mm

    def frame(self) -> pd.DataFrame:
        """One row per track: ``track_id, n_hits, pt, eta, phi, d0, z0, charge, chi2_ndf``."""
        return pd.DataFrame({"track_id": self.track_id, "n_hits": self.n_hits, "pt": self.pt,
                             "eta": self.eta, "phi": self.phi, "d0": self.d0, "z0": self.z0,
                             "charge": self.charge, "chi2_ndf": self.chi2_ndf})


def _sums(inverse: np.ndarray, n_tracks: int, *values: np.ndarray) -> list[np.ndarray]:
    return [np.bincount(inverse, weights=v, minlength=n_tracks) for v in values]


def _hit_weights(u: np.ndarray, v: np.ndarray, x: np.ndarray, y: np.ndarray, a: np.ndarray,
                 b: np.ndarray, res: np.ndarray, sigma_fine: np.ndarray,
                 sigma_r: np.ndarray) -> np.ndarray:
    """Per hit, ``(sigma_0 / sigma_i)^2 / (1 + (res_i / OUTLIER_SCALE)^2)``: the inverse
    variance of its circle residual (the fine pitch, and in an endcap the coarse radial pitch
    times the cosine between the hit's radial direction and the circle's normal there),
    relative to the pixel's ``sigma_0``, times a Cauchy weight that lets a hit far off the
    circle (a wrong hit, noise) pull no more than :data:`OUTLIER_SCALE` does."""
    du, dv = u - a, v - b
    dist = np.maximum(np.hypot(du, dv), 1e-12)
    r = np.maximum(np.hypot(x, y), 1e-12)
    cos_beta = (du * x + dv * y) / (dist * r)
    sigma2 = sigma_fine ** 2 + (sigma_r * cos_beta) ** 2
    return (PIXEL_SIGMA ** 2 / sigma2) / (1.0 + (res / OUTLIER_SCALE) ** 2)


def _robust_rss(inverse: np.ndarray, n_tracks: int, u, v, x, y, sigma_fine, sigma_r,
                a: np.ndarray, b: np.ndarray, radius: np.ndarray) -> np.ndarray:
    """Per track, the sum of ``(sigma_0 / sigma_i)^2 log(1 + (res_i / OUTLIER_SCALE)^2)``: the
    robust loss whose minimum the weights of :func:`_hit_weights` find."""
    res = np.hypot(u - a[inverse], v - b[inverse]) - radius[inverse]
    weight = _hit_weights(u, v, x, y, a[inverse], b[inverse], np.zeros_like(res), sigma_fine,
                          sigma_r)
    return np.bincount(inverse, weights=weight * np.log1p((res / OUTLIER_SCALE) ** 2),
                       minlength=n_tracks)


def _three_point_start(inverse: np.ndarray, n_tracks: int, u: np.ndarray, v: np.ndarray,
                       x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, ...]:
    """Per track, the circle ``(a, b, radius)`` (centred coordinates) through its innermost,
    middle and outermost hits by transverse radius; :data:`MAX_RADIUS` where they are on a
    line (or the track has fewer than 3 hits)."""
    order = np.lexsort((np.hypot(x, y), inverse))
    start = np.searchsorted(inverse[order], np.arange(n_tracks), side="left")
    stop = np.searchsorted(inverse[order], np.arange(n_tracks), side="right")
    last = max(len(order) - 1, 0)
    pick = [order[np.clip(i, 0, last)] if len(order) else np.zeros(n_tracks, np.int64)
            for i in (start, (start + stop - 1) // 2, stop - 1)]
    (u1, v1), (u2, v2), (u3, v3) = ((u[i], v[i]) for i in pick) if len(order) else \
        ((np.zeros(n_tracks), np.zeros(n_tracks)),) * 3
    det = 2.0 * (u1 * (v2 - v3) + u2 * (v3 - v1) + u3 * (v1 - v2))
    q1, q2, q3 = u1 * u1 + v1 * v1, u2 * u2 + v2 * v2, u3 * u3 + v3 * v3
    with np.errstate(divide="ignore", invalid="ignore"):
        a = (q1 * (v2 - v3) + q2 * (v3 - v1) + q3 * (v1 - v2)) / det
        b = (q1 * (u3 - u2) + q2 * (u1 - u3) + q3 * (u2 - u1)) / det
    radius = np.hypot(u1 - a, v1 - b)
    ok = np.isfinite(radius) & (radius <= MAX_RADIUS) & (stop - start >= 3)
    return np.where(ok, a, 0.0), np.where(ok, b, MAX_RADIUS), np.where(ok, radius, MAX_RADIUS)


def _weighted_circle(inverse, n_tracks, fitted, u, v, x, y, sigma_fine, sigma_r, a, b, radius):
    """Gauss-Newton steps on the weighted geometric residuals (:func:`_hit_weights`, the
    weights renewed at every step: iteratively reweighted least squares) from ``(a, b,
    radius)`` in the centred coordinates ``u, v``."""
    for _ in range(GAUSS_NEWTON_STEPS):
        du, dv = u - a[inverse], v - b[inverse]
        dist = np.maximum(np.hypot(du, dv), 1e-12)
        res = dist - radius[inverse]
        w = _hit_weights(u, v, x, y, a[inverse], b[inverse], res, sigma_fine, sigma_r)
        ju, jv = -du / dist, -dv / dist            # d res / d(a, b); d res / d R = -1
        s_uu, s_uv, s_vv, s_u, s_v, s_1, r_u, r_v, r_1 = _sums(
            inverse, n_tracks, w * ju * ju, w * ju * jv, w * jv * jv, w * ju, w * jv, w,
            w * ju * res, w * jv * res, w * res)
        jtj = np.stack([np.stack([s_uu, s_uv, -s_u], -1), np.stack([s_uv, s_vv, -s_v], -1),
                        np.stack([-s_u, -s_v, s_1], -1)], -2)
        step = _solve3(jtj, -np.stack([r_u, r_v, -r_1], -1))
        step = np.nan_to_num(step, nan=np.inf)
        new_radius = radius + step[:, 2]
        # a step towards an ever larger circle (a straight track) is not taken
        good = np.isfinite(step).all(axis=1) & fitted & (new_radius > 0) & \
            (new_radius <= MAX_RADIUS)
        a = np.where(good, a + np.where(good, step[:, 0], 0.0), a)
        b = np.where(good, b + np.where(good, step[:, 1], 0.0), b)
        radius = np.where(good, new_radius, radius)
    return a, b, radius


def _solve3(m: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """Batched 3x3 solves ``m [T, 3, 3] x = rhs [T, 3]``; singular systems give NaN."""
    out = np.full(rhs.shape, np.nan)
    ok = np.abs(np.linalg.det(m)) > 1e-300
    if ok.any():
        out[ok] = np.linalg.solve(m[ok], rhs[ok][..., None])[..., 0]
    return out


#: The fit runs compiled (trkx.tracks.fit.helix_kernels) where numba is importable; the tests
#: set it False to compare with the numpy fit, its reference.
COMPILED_FIT = numba_importable()


@dataclass(frozen=True, eq=False)
class FitInputs:
    """What the compiled fits read: the hits of fitted ids (``used``, ids >= 0), each one's
    track 0..len(ids)-1 (``inverse``), positions and resolutions (:func:`hit_resolutions`)."""

    used: np.ndarray
    ids: np.ndarray
    inverse: np.ndarray
    x: np.ndarray
    y: np.ndarray
    z: np.ndarray
    volumes: np.ndarray

    def kernel_arguments(self) -> tuple:
        """The arguments of trkx.tracks.fit.helix_kernels.fit_tracks, in its order."""
        return (np.ascontiguousarray(self.inverse, dtype=np.int64), len(self.ids),
                *(np.ascontiguousarray(a) for a in (self.x, self.y, self.z,
                                                    *hit_resolutions(self.volumes))),
                GAUSS_NEWTON_STEPS, float(PIXEL_SIGMA ** 2), OUTLIER_SCALE, MAX_RADIUS)


def fit_inputs(track_id: np.ndarray, x: np.ndarray, y: np.ndarray, z: np.ndarray,
               volume_id: np.ndarray | None = None) -> FitInputs:
    """:class:`FitInputs` of :func:`fit_helices`' arguments."""
    track_id = np.asarray(track_id, dtype=np.int64)
    used = track_id >= 0
    ids, inverse_used = np.unique(track_id[used], return_inverse=True)
    x, y, z = (np.asarray(a, dtype=np.float64)[used] for a in (x, y, z))
    volumes = (np.full(len(x), 8) if volume_id is None
               else np.asarray(volume_id, dtype=np.int64)[used])
    return FitInputs(used, ids, inverse_used.reshape(-1), x, y, z, volumes)


def helix_fit_from_rows(ids: np.ndarray, counts: np.ndarray, rows: np.ndarray,
                        field: float) -> HelixFit:
    """The :class:`HelixFit` of a compiled fit's hit counts and rows
    (trkx.tracks.fit.helix_kernels.OUTPUTS)."""
    return _helix_fit(ids, counts, *rows, field)


def fit_helices(track_id: np.ndarray, x: np.ndarray, y: np.ndarray, z: np.ndarray,
                volume_id: np.ndarray | None = None, field: float = FIELD_TESLA) -> HelixFit:
    """Fit every track of ``track_id`` (one id per hit; negative ids are not fitted) to the
    hits at ``(x, y, z)`` mm; ``volume_id`` sets the hit resolutions of chi2 (None: pixel)."""
    inputs = fit_inputs(track_id, x, y, z, volume_id)
    if not COMPILED_FIT:
        return _fit_numpy(inputs.ids, inputs.inverse, inputs.x, inputs.y, inputs.z,
                          inputs.volumes, field)
    from trkx.tracks.fit.helix_kernels import fit_tracks

    counts, rows = fit_tracks(*inputs.kernel_arguments())
    return helix_fit_from_rows(inputs.ids, counts, rows, field)


def _fit_numpy(ids: np.ndarray, inverse: np.ndarray, x: np.ndarray, y: np.ndarray,
               z: np.ndarray, volumes: np.ndarray, field: float) -> HelixFit:
    """:func:`fit_helices` with numpy arrays over all tracks at once (the reference of the
    compiled fit); ``inverse`` each hit's track, 0..len(ids)-1."""
    n_tracks = len(ids)
    n = np.bincount(inverse, minlength=n_tracks).astype(np.float64)
    fitted = n >= 3
    nn = np.maximum(n, 1.0)

    # 1. circle: algebraic fit on centred coordinates, then Gauss-Newton on the geometric one
    mx, my = (s / nn for s in _sums(inverse, n_tracks, x, y))
    u, v = x - mx[inverse], y - my[inverse]
    w = u * u + v * v
    suu, svv, suv, suw, svw, sw = _sums(inverse, n_tracks, u * u, v * v, u * v, u * w, v * w, w)
    zero = np.zeros(n_tracks)
    m = np.stack([np.stack([suu, suv, zero], -1), np.stack([suv, svv, zero], -1),
                  np.stack([zero, zero, n], -1)], -2)
    d, e, f = _solve3(m, -np.stack([suw, svw, sw], -1)).T
    a, b = -0.5 * d, -0.5 * e
    radius = np.sqrt(np.maximum(a * a + b * b - f, 0.0))
    # a nearly straight track leaves the algebraic system (close to) singular: start instead
    # from a far centre perpendicular to the hits' principal direction when that fits better
    angle = 0.5 * np.arctan2(2 * suv, suu - svv)
    far_a, far_b = -np.sin(angle) * MAX_RADIUS, np.cos(angle) * MAX_RADIUS
    usable = np.isfinite(a) & np.isfinite(b) & np.isfinite(radius) & (radius <= MAX_RADIUS)
    a, b = np.where(usable, a, far_a), np.where(usable, b, far_b)
    radius = np.where(usable, radius, MAX_RADIUS)
    sigma_fine, _, sigma_r = hit_resolutions(volumes)
    # two starts, each refined by the weighted steps: the algebraic circle, and the circle
    # through the innermost, middle and outermost hits (which a wrong hit cannot pull); the
    # one of smaller robust loss is kept
    fits = [_weighted_circle(inverse, n_tracks, fitted, u, v, x, y, sigma_fine, sigma_r,
                             *start)
            for start in ((a, b, radius), _three_point_start(inverse, n_tracks, u, v, x, y))]
    losses = [_robust_rss(inverse, n_tracks, u, v, x, y, sigma_fine, sigma_r, *fit)
              for fit in fits]
    second = losses[1] < losses[0]
    a, b, radius = (np.where(second, late, early) for early, late in zip(*fits))
    # a nearly straight track: the line through the hits' principal direction, when its robust
    # weighted residuals are smaller than the circle's
    straight = _robust_rss(inverse, n_tracks, u, v, x, y, sigma_fine, sigma_r, far_a, far_b,
                           np.full(n_tracks, MAX_RADIUS)) < \
        _robust_rss(inverse, n_tracks, u, v, x, y, sigma_fine, sigma_r, a, b, radius)
    a, b = np.where(straight, far_a, a), np.where(straight, far_b, b)
    radius = np.where(straight, MAX_RADIUS, radius)
    a, b = a + mx, b + my
    du, dv = x - a[inverse], y - b[inverse]
    res_xy = np.hypot(du, dv) - radius[inverse]

    # turning sense from the innermost to the outermost hit
    r_hit = np.hypot(x, y)
    order = np.lexsort((r_hit, inverse))
    first = order[np.searchsorted(inverse[order], np.arange(n_tracks), side="left")
                  .clip(0, max(len(order) - 1, 0))] if len(order) else np.zeros(0, np.int64)
    last = order[(np.searchsorted(inverse[order], np.arange(n_tracks), side="right") - 1)
                 .clip(0, max(len(order) - 1, 0))] if len(order) else np.zeros(0, np.int64)
    cross = du[first] * dv[last] - dv[first] * du[last] if len(order) else zero
    sense = np.where(cross >= 0, 1.0, -1.0)

    # closest approach to the beam line and the direction there
    centre = np.hypot(a, b)
    scale = 1.0 - radius / np.maximum(centre, 1e-12)
    p0x, p0y = a * scale, b * scale
    tx, ty = -sense * (p0y - b) / radius, sense * (p0x - a) / radius
    d0 = tx * p0y - ty * p0x
    phi = np.arctan2(ty, tx)

    # 2. line z = z0 + s cot(theta) on the path length from the closest approach
    alpha0 = np.arctan2(p0y - b, p0x - a)
    turn = np.arctan2(dv, du) - alpha0[inverse]
    turn = (turn + np.pi) % (2 * np.pi) - np.pi
    s = sense[inverse] * radius[inverse] * turn
    ss, sz, s1, z1 = _sums(inverse, n_tracks, s * s, s * z, s, z)
    denominator = n * ss - s1 * s1
    flat = np.abs(denominator) <= 1e-12 * np.maximum(n * ss, 1e-300)
    cot = np.where(flat, 0.0, (n * sz - s1 * z1) / np.where(flat, 1.0, denominator))
    z0 = (z1 - cot * s1) / nn
    res_z = z - z0[inverse] - cot[inverse] * s

    sigma_xy, sigma_z, sigma_r = hit_resolutions(volumes)
    sigma_zz = np.sqrt(sigma_z ** 2 + (sigma_r * cot[inverse]) ** 2 + 1e-6 ** 2)
    chi2, sq_xy, sq_z = _sums(inverse, n_tracks, (res_xy / sigma_xy) ** 2 + (res_z / sigma_zz)
                              ** 2, res_xy ** 2, res_z ** 2)
    return _helix_fit(ids, n, radius, sense, d0, phi, z0, cot, chi2, sq_xy, sq_z, field)


def _helix_fit(ids: np.ndarray, n: np.ndarray, radius: np.ndarray, sense: np.ndarray,
               d0: np.ndarray, phi: np.ndarray, z0: np.ndarray, cot: np.ndarray,
               chi2: np.ndarray, sq_xy: np.ndarray, sq_z: np.ndarray,
               field: float) -> HelixFit:
    """The :class:`HelixFit` of the per-track circle, line and residual sums (NaN parameters
    for tracks of < 3 hits)."""
    fitted = n >= 3
    nn = np.maximum(n, 1.0)
    ndf = np.maximum(2 * n - 5, 1.0)
    pt = PT_PER_TESLA_MM * abs(field) * radius
    charge = -sense * np.sign(field if field != 0 else 1.0)
    nan = np.where(fitted, 1.0, np.nan)
    return HelixFit(track_id=ids, n_hits=n.astype(np.int64), pt=pt * nan,
                    eta=np.arcsinh(cot) * nan, phi=phi * nan, d0=d0 * nan, z0=z0 * nan,
                    charge=np.where(fitted, charge, 0.0).astype(np.int64),
                    chi2_ndf=chi2 / ndf * nan, rms_xy=np.sqrt(sq_xy / nn) * nan,
                    rms_z=np.sqrt(sq_z / nn) * nan, radius=radius * nan)
