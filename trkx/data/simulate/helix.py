"""Helices in a uniform solenoidal field ``B`` along z, parametrised by transverse path length.

A particle of charge ``q`` (units of e) and transverse momentum ``pT`` (GeV) at ``(x0, y0, z0)``
with azimuth ``phi0`` and ``cot(theta)`` moves on a circle of radius

    R = pT / (0.3 |q| B)      [m, with B in T]  =  1000 pT / (0.3 |q| B)  mm,

turning with sense ``h = -sign(q B)`` (positive charges turn clockwise seen from +z when
``B > 0``). After a transverse path length ``s`` (turning angle ``psi = s / R``)

    x(s) = x0 + 2 R sin(psi/2) cos(phi0 + h psi/2),
    y(s) = y0 + 2 R sin(psi/2) sin(phi0 + h psi/2),
    z(s) = z0 + s cot(theta),
    phi(s) = phi0 + h psi,

a chord form that stays exact for straight tracks (``R`` -> infinity). The circle's centre is
``(x0 - h R sin phi0, y0 + h R cos phi0)``.

Crossings:

* cylinder ``r = rho``: the two intersections of the track circle (centre ``C``, ``|C| = d``)
  with the circle ``rho`` sit at azimuths ``atan2(C) +- arccos((rho^2 + d^2 - R^2) / (2 rho
  d))``; their turning angle from the start is ``h (beta_P - beta_0) mod 2 pi`` with
  ``beta`` the angle around the centre;
* disk ``z = z_d``: ``s = (z_d - z0) / cot(theta)``;
* plane ``n . (x - c) = 0``: Newton iterations on ``f(s) = n . (x(s) - c)``,
  ``f'(s) = n . t(s)`` with the unit-transverse tangent ``t = (cos phi, sin phi, cot theta)``.
"""

from __future__ import annotations

import numpy as np

#: ``R[mm] = PT_TO_RADIUS * pT[GeV] / (|q| B[T])``.
PT_TO_RADIUS = 1000.0 / 0.299792458
#: Largest radius used (straight tracks and q = 0): keeps the circle algebra well conditioned.
MAX_RADIUS = 1.0e8


def helix_radius(pt: np.ndarray, charge: np.ndarray, field: float) -> np.ndarray:
    """Radius (mm) of the transverse circle, capped at :data:`MAX_RADIUS`."""
    qb = np.abs(np.asarray(charge, dtype=np.float64)) * abs(field)
    with np.errstate(divide="ignore"):
        radius = np.where(qb > 0, PT_TO_RADIUS * np.asarray(pt) / np.maximum(qb, 1e-300),
                          MAX_RADIUS)
    return np.minimum(radius, MAX_RADIUS)


def turn_sense(charge: np.ndarray, field: float) -> np.ndarray:
    """``h = -sign(q B)`` (+1 anticlockwise); neutral particles get +1 (they do not turn)."""
    sense = -np.sign(np.asarray(charge, dtype=np.float64) * field)
    return np.where(sense == 0, 1.0, sense)


def position_at(x0: np.ndarray, phi0: np.ndarray, cot: np.ndarray, radius: np.ndarray,
                sense: np.ndarray, s: np.ndarray) -> np.ndarray:
    """Points ``[..., 3]`` after transverse path ``s``; ``x0`` is ``[..., 3]``."""
    psi = s / radius
    chord = 2.0 * radius * np.sin(0.5 * psi)
    heading = phi0 + 0.5 * sense * psi
    return np.stack([x0[..., 0] + chord * np.cos(heading),
                     x0[..., 1] + chord * np.sin(heading),
                     x0[..., 2] + s * cot], axis=-1)


def azimuth_at(phi0: np.ndarray, radius: np.ndarray, sense: np.ndarray, s: np.ndarray,
               ) -> np.ndarray:
    """Direction azimuth ``phi0 + h s / R`` after transverse path ``s``."""
    return phi0 + sense * s / radius


def cylinder_crossings(x0: np.ndarray, phi0: np.ndarray, radius: np.ndarray,
                       sense: np.ndarray, rho: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Transverse path lengths ``(s1, s2)`` in ``[0, 2 pi R)`` to the cylinders ``rho``.

    Shapes broadcast: ``x0 [n, 1, 3]``, ``phi0, radius, sense [n, 1]``, ``rho [L]`` give
    ``[n, L]``. NaN where the circle does not meet the cylinder.
    """
    cx = x0[..., 0] - sense * radius * np.sin(phi0)
    cy = x0[..., 1] + sense * radius * np.cos(phi0)
    d = np.hypot(cx, cy)
    with np.errstate(invalid="ignore", divide="ignore"):
        cos_half = (rho * rho + (d - radius) * (d + radius)) / (2.0 * rho * d)
        half = np.arccos(np.where(np.abs(cos_half) <= 1.0, cos_half, np.nan))
    alpha = np.arctan2(cy, cx)
    beta0 = np.arctan2(x0[..., 1] - cy, x0[..., 0] - cx)
    out = []
    for sign in (1.0, -1.0):
        azimuth = alpha + sign * half
        px, py = rho * np.cos(azimuth), rho * np.sin(azimuth)
        beta = np.arctan2(py - cy, px - cx)
        psi = np.mod(sense * (beta - beta0), 2.0 * np.pi)
        out.append(psi * radius)
    return out[0], out[1]


def plane_crossing(x0: np.ndarray, phi0: np.ndarray, cot: np.ndarray, radius: np.ndarray,
                   sense: np.ndarray, normal: np.ndarray, center: np.ndarray, s_start: np.ndarray,
                   iterations: int = 4) -> tuple[np.ndarray, np.ndarray]:
    """Path length ``s`` where the helix meets each plane, by Newton from ``s_start``.

    Returns ``(s, residual)``; ``residual = |n . (x(s) - c)|`` in mm (non-converged crossings,
    e.g. tangent ones, keep a large residual and should be discarded).
    """
    s = s_start.copy()
    for _ in range(iterations):
        point = position_at(x0, phi0, cot, radius, sense, s)
        phi = azimuth_at(phi0, radius, sense, s)
        f = np.einsum("...i,...i->...", normal, point - center)
        slope = normal[..., 0] * np.cos(phi) + normal[..., 1] * np.sin(phi) + normal[..., 2] * cot
        with np.errstate(divide="ignore", invalid="ignore"):
            step = np.where(np.abs(slope) > 1e-9, f / slope, 0.0)
        s = s - np.clip(step, -50.0, 50.0)
    point = position_at(x0, phi0, cot, radius, sense, s)
    residual = np.abs(np.einsum("...i,...i->...", normal, point - center))
    return s, residual
