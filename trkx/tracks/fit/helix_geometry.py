"""A fitted helix as geometry: its circle, its perigee, and where a hit lies against it.

For the helices of trkx.tracks.fit.helix_fit (``phi`` and ``d0`` at the perigee, the closest
approach to the beam line; turning sense ``h = -charge sign(B)``; radius ``R = pT / (0.3 B)``):

    perigee p0 = (-d0 sin(phi), d0 cos(phi)),   circle centre c = p0 + h R (-sin(phi), cos(phi)),
    alpha0 = atan2(p0 - c) (the perigee's angle around c),   cot(theta) = sinh(eta),

and a hit at ``(x, y, z)`` against helix ``t`` has

    e  = |(x, y) - c_t| - R_t                                  (transverse residual, mm)
    s  = h_t R_t wrap(atan2(y - b_t, x - a_t) - alpha0_t)      (path length from the perigee)
    dz = z - z0_t - s cot(theta_t)                             (residual along the beam, mm)

with ``wrap`` to [-pi, pi). The extension (trkx.tracks.builder.extension) and the short-track
inputs (trkx.tracks.fit.short_inputs) read hits against helices this way.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from trkx.tracks.fit.helix_fit import FIELD_TESLA, PT_PER_TESLA_MM


def helix_geometry(helices: pd.DataFrame, field: float = FIELD_TESLA) -> dict[str, np.ndarray]:
    """Circle centre ``a, b``, ``radius``, turning ``sense``, perigee angle ``alpha0``, ``z0``
    and ``cot`` of the fitted helices (rows of ``helices``: trkx.tracks.fit.helix_fit's
    convention, ``phi`` and ``d0`` at the perigee, sense ``h = -charge sign(B)``)."""
    phi = helices["phi"].to_numpy(np.float64)
    d0 = helices["d0"].to_numpy(np.float64)
    radius = helices["pt"].to_numpy(np.float64) / (PT_PER_TESLA_MM * abs(field))
    sense = -helices["charge"].to_numpy(np.float64) * np.sign(field if field != 0 else 1.0)
    tx, ty = np.cos(phi), np.sin(phi)
    p0x, p0y = -d0 * ty, d0 * tx                       # the perigee, d0 = t x p0
    a, b = p0x - sense * ty * radius, p0y + sense * tx * radius
    return {"a": a, "b": b, "radius": radius, "sense": sense,
            "alpha0": np.arctan2(p0y - b, p0x - a),
            "z0": helices["z0"].to_numpy(np.float64),
            "cot": np.sinh(helices["eta"].to_numpy(np.float64))}


def helix_residuals(geometry: dict[str, np.ndarray], track: np.ndarray, x: np.ndarray,
                    y: np.ndarray, z: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(e, dz, s)`` (module docstring) of hits ``(x, y, z)`` against the helices of
    rows ``track`` of ``geometry``."""
    a, b, radius, sense, alpha0, z0, cot = (geometry[k][track] for k in (
        "a", "b", "radius", "sense", "alpha0", "z0", "cot"))
    e = np.hypot(x - a, y - b) - radius
    turn = np.arctan2(y - b, x - a) - alpha0
    turn = (turn + np.pi) % (2 * np.pi) - np.pi
    s = sense * radius * turn
    return e, z - z0 - cot * s, s
