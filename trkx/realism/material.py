"""What the material does to a track, read from its true crossings: the scatter off its circle
and the momentum it loses (the simulator's support fraction and energy loss are fitted on these
two figures against the real sample event: docs/levers.md, "The simulator's material, fitted"),
and the material between one crossing and the next (:func:`material_between_crossings`, the
calibrated fit's scattering: trkx.tracks.fit.covariance).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from trkx.data.detector import BARREL_GROUPS, PIXEL_VOLUMES, VOLUME_GROUP
from trkx.data.simulate.physics import highland_angle
from trkx.realism.distributions import PROMPT_RADIUS
from trkx.tracks.fit.field_map import check_field_map, relative_field
from trkx.tracks.fit.helix_fit import FIELD_TESLA, PT_PER_TESLA_MM


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


_MAD_TO_SIGMA = 1.4826


def thickness_from_angle(theta0_times_p: float) -> float:
    """The ``x / X0`` whose Highland angle for ``beta p = 1 GeV`` is ``theta0_times_p``
    (rad GeV), between 1e-6 and 2 X0 (1e-6 for an angle below that material's: no kick; 2 for
    one above that material's)."""
    from scipy.optimize import brentq

    one = np.ones(1)

    def excess(x: float) -> float:
        return float(highland_angle(one, one, one, np.array([x]))[0]) - theta0_times_p

    if excess(1e-6) >= 0.0:
        return 1e-6
    return 2.0 if excess(2.0) <= 0.0 else float(brentq(excess, 1e-6, 2.0))


def crossing_kicks(hits: pd.DataFrame, particles: pd.DataFrame, truth: pd.DataFrame,
                   pt_min: float = 0.7, field_map: str = "solenoid") -> pd.DataFrame:
    """The kicks a track's direction takes from one crossing to the next.

    A field along the beam turns the transverse momentum and leaves ``theta`` alone, and the
    energy loss keeps the direction, so the change of ``theta`` between consecutive crossings of
    a particle (ordered by distance from its vertex; true momenta ``tpx, tpy, tpz``) is the
    scattering: Highland's ``theta0`` projected, ``~ 13.6 MeV / (beta p) sqrt(x / X0)``. The
    azimuth turns by the field's bend as well; less that bend, ``q B chord / pT`` over the
    transverse chord between the crossings (``B`` of ``field_map`` at their mean z,
    trkx.tracks.fit.field_map; ``pT`` their mean), its change seen across the track,
    ``(dphi - bend) sin(theta)``, is the scattering in the other projection: the same width
    where the field is the map's. One row per consecutive pair of crossings of a prompt
    particle (``r_v <= 1 mm``) of vertex pT >= ``pt_min``: ``same_layer`` (the next on the same
    layer: overlapping modules), the volume groups (:data:`trkx.data.detector.VOLUME_GROUP`)
    ``group`` and ``next_group``, ``kick`` (``p dtheta``, rad GeV), ``kick_across`` (``p
    (dphi - bend) sin(theta)``) and ``incidence`` (the first crossing's ``sin(theta)`` in a
    barrel, ``|cos(theta)|`` on a disk)."""
    check_field_map(field_map)
    table = truth.merge(hits[["hit_id", "volume_id", "layer_id"]], on="hit_id")
    table = table.merge(particles[["particle_id", "vx", "vy", "vz", "px", "py", "pz", "q"]],
                        on="particle_id")
    keep = ((np.hypot(table["vx"], table["vy"]) <= PROMPT_RADIUS)
            & (np.hypot(table["px"], table["py"]) >= pt_min))
    table = table[keep].copy()
    table["distance"] = np.sqrt((table["tx"] - table["vx"]) ** 2 + (table["ty"] - table["vy"])
                                ** 2 + (table["tz"] - table["vz"]) ** 2)
    table = table.sort_values(["particle_id", "distance"], kind="stable")
    tpx, tpy, tpz = (table[k].to_numpy(np.float64) for k in ("tpx", "tpy", "tpz"))
    x, y, z = (table[k].to_numpy(np.float64) for k in ("tx", "ty", "tz"))
    transverse = np.hypot(tpx, tpy)
    theta = np.arctan2(transverse, tpz)
    group = table["volume_id"].map(VOLUME_GROUP).to_numpy()
    layer = table["volume_id"].to_numpy() * 1000 + table["layer_id"].to_numpy()
    particle = table["particle_id"].to_numpy()
    momentum = np.sqrt(table["px"] ** 2 + table["py"] ** 2 + table["pz"] ** 2).to_numpy()
    incidence = np.where(np.isin(group, BARREL_GROUPS), np.sin(theta), np.abs(np.cos(theta)))
    field = FIELD_TESLA * (relative_field(0.5 * (z[1:] + z[:-1])) if field_map == "solenoid"
                           else 1.0)
    chord = np.hypot(x[1:] - x[:-1], y[1:] - y[:-1])
    bend = (-table["q"].to_numpy(np.float64)[:-1] * PT_PER_TESLA_MM * field * chord
            / np.maximum(0.5 * (transverse[1:] + transverse[:-1]), 1e-9))
    turn = np.angle(np.exp(1j * (np.arctan2(tpy[1:], tpx[1:]) - np.arctan2(tpy[:-1], tpx[:-1]))))
    pair = particle[1:] == particle[:-1]
    return pd.DataFrame({"same_layer": (layer[1:] == layer[:-1])[pair],
                         "group": group[:-1][pair], "next_group": group[1:][pair],
                         "kick": ((theta[1:] - theta[:-1]) * momentum[:-1])[pair],
                         "kick_across": ((turn - bend) * np.sin(theta[:-1])
                                         * momentum[:-1])[pair],
                         "incidence": incidence[:-1][pair]})


def material_between_crossings(kicks: pd.DataFrame, min_pairs: int = 5) -> pd.DataFrame:
    """The material a track crosses from one crossing to the next, read from the kicks of
    :func:`crossing_kicks` (one event's, or several events' concatenated). Per ``(same_layer,
    group, next_group)`` with >= ``min_pairs`` pairs: ``pairs``, ``width_mrad_gev`` (robust
    width, 1.4826 MAD, of the kicks), ``x0_crossed`` (the ``x / X0`` whose Highland angle it
    is, ``beta = 1``) and ``x0_normal`` (times the pairs' median incidence: the material at
    normal incidence); the same of the kicks across the track, ``width_across_mrad_gev`` and
    ``x0_normal_across`` (where the field is not the map's, wider). Rows sorted by those
    keys."""
    rows = []
    for (same, first, then), pairs in kicks.groupby(["same_layer", "group", "next_group"]):
        if len(pairs) < min_pairs:
            continue
        width, across = (_robust_width(pairs[k].to_numpy()) for k in ("kick", "kick_across"))
        crossed = thickness_from_angle(width)
        incidence = float(np.median(pairs["incidence"]))
        rows.append({"same_layer": bool(same), "group": int(first), "next_group": int(then),
                     "pairs": len(pairs), "width_mrad_gev": 1e3 * width, "x0_crossed": crossed,
                     "x0_normal": crossed * incidence, "width_across_mrad_gev": 1e3 * across,
                     "x0_normal_across": thickness_from_angle(across) * incidence})
    return pd.DataFrame(rows, columns=["same_layer", "group", "next_group", "pairs",
                                       "width_mrad_gev", "x0_crossed", "x0_normal",
                                       "width_across_mrad_gev", "x0_normal_across"])


def _robust_width(values: np.ndarray) -> float:
    """1.4826 times the median absolute deviation: sigma for a Gaussian core."""
    return _MAD_TO_SIGMA * float(np.median(np.abs(values - np.median(values))))
