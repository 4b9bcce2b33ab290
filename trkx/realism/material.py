"""What the material does to a track, read from its true crossings: the scatter off its circle
and the momentum it loses (the simulator's support fraction and energy loss are fitted on these
two figures against the real sample event: docs/levers.md, "The simulator's material, fitted").
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from trkx.data.detector import PIXEL_VOLUMES
from trkx.realism.distributions import PROMPT_RADIUS


def _circle_rms(x: np.ndarray, y: np.ndarray) -> float:
    """RMS distance of points from their least-squares circle (algebraic Kasa fit:
    ``x^2 + y^2 = a x + b y + c``, centre ``(a/2, b/2)``)."""
    design = np.stack([x, y, np.ones_like(x)], axis=1)
    (a, b, c), *_ = np.linalg.lstsq(design, x * x + y * y, rcond=None)
    cx, cy = a / 2, b / 2
    radius = np.sqrt(c + cx * cx + cy * cy)
    return float(np.sqrt(np.mean((np.hypot(x - cx, y - cy) - radius) ** 2)))


def material_facts(hits: pd.DataFrame, particles: pd.DataFrame, truth: pd.DataFrame,
                   pt_range: tuple[float, float] = (1.0, 2.0), min_hits: int = 5) -> dict:
    """What the material does to a track, from its true crossings (``tx, ty, tz, tpx, tpy``).

    Prompt particles (``r_v <= 1 mm``) of vertex pT in ``pt_range`` with ``>= min_hits`` hits:
    ``pixel_circle_rms_um``, the median over particles with >= 4 pixel hits of the RMS distance
    of their pixel crossings from the circle through them (multiple scattering bends a track
    off its circle; the field hardly changes over the pixel detector); ``pt_loss``, the median
    ``1 - pT_last / pT_first`` over the particle's crossings ordered by distance from its
    vertex (energy loss).
    """
    table = truth.merge(hits[["hit_id", "volume_id"]], on="hit_id")
    table = table.merge(particles[["particle_id", "vx", "vy", "vz", "px", "py"]],
                        on="particle_id")
    pt = np.hypot(table["px"], table["py"])
    keep = ((np.hypot(table["vx"], table["vy"]) <= PROMPT_RADIUS)
            & (pt >= pt_range[0]) & (pt < pt_range[1]))
    table = table[keep]
    rms, loss = [], []
    for _, track in table.groupby("particle_id"):
        if len(track) < min_hits:
            continue
        pixel = track[track["volume_id"].isin(PIXEL_VOLUMES)]
        if len(pixel) >= 4:
            rms.append(_circle_rms(pixel["tx"].to_numpy(), pixel["ty"].to_numpy()) * 1000.0)
        distance = np.sqrt((track["tx"] - track["vx"]) ** 2 + (track["ty"] - track["vy"]) ** 2
                           + (track["tz"] - track["vz"]) ** 2).to_numpy()
        order = np.argsort(distance)
        crossing_pt = np.hypot(track["tpx"], track["tpy"]).to_numpy()[order]
        loss.append(1.0 - crossing_pt[-1] / crossing_pt[0])
    return {"pixel_circle_rms_um": float(np.median(rms)) if rms else None,
            "pt_loss": float(np.median(loss)) if loss else None,
            "particles": len(loss), "particles_with_pixel_fit": len(rms)}
