"""Clusters of cells for module crossings, and the measured hit at the cluster centroid.

A track crossing a module at local ``(u0, v0, 0)`` with local unit direction ``d`` traverses
the silicon between ``w = -t/2`` and ``w = +t/2``, i.e. the segment

    (u, v)(w) = (u0, v0) + (d_u, d_v) / d_w * w.

The segment is sampled at ``S`` equally spaced points, each carrying ``dE/dx * L / S`` of
charge (``L`` the 3-D path length in the silicon); every sample is smeared by a Gaussian of
``cluster_spread`` pitches (charge sharing / diffusion) and lands in cell

    ch0 = floor((u + maxhu) / pitch_u),    ch1 = floor((v + hv) / pitch_v),

clamped to the module's grid. Cells are the distinct channels hit; pixel cells (pitch_v < 1 mm)
keep their charge as ``value`` (cells under ``pixel_threshold`` of the cluster's largest are
dropped), strip cells get ``value = 1`` as in the TrackML files. The defaults (``dE/dx`` = 2
charge units per mm, spread 0.15 pitch) give what the real sample event shows: ~6 cells per
pixel-barrel hit, ~2 per pixel-endcap or strip hit, pixel-endcap cell values ~0.15. The
measured position is the value-weighted centroid of the cell centres
``((ch0 + 1/2) pitch_u - maxhu, (ch1 + 1/2) pitch_v - hv)`` mapped back to global
coordinates, so the resolution follows from the pitch.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from trkx.data.detector import Detector

_SAMPLES = 12
_STRIP_PITCH_V = 1.0  # mm: modules with a longer cell are strips (binary readout)
_MAX_SEGMENT_PITCHES = 30.0


@dataclass
class Clusters:
    """Cells (rows refer to hits by index) and the measured local centroid of every hit."""

    hit: np.ndarray       # [C] hit index
    ch0: np.ndarray       # [C]
    ch1: np.ndarray       # [C]
    value: np.ndarray     # [C]
    centroid: np.ndarray  # [H, 2] local (u, v)


def make_clusters(detector: Detector, modules: np.ndarray, local_point: np.ndarray,
                  local_direction: np.ndarray, rng: np.random.Generator, dedx: float = 2.0,
                  spread: float = 0.15, threshold: float = 0.1) -> Clusters:
    """Cells and centroids of hits on ``modules`` (see module docstring for the model)."""
    n = modules.size
    thickness = detector.thickness[modules]
    pu, pv = detector.pitch_u[modules], detector.pitch_v[modules]
    dw = np.where(np.abs(local_direction[:, 2]) < 1e-3, 1e-3, local_direction[:, 2])
    slope = local_direction[:, :2] / dw[:, None]
    half = 0.5 * thickness[:, None] * slope                                  # [n, 2]
    limit = _MAX_SEGMENT_PITCHES * np.stack([pu, pv], 1)
    half = np.clip(half, -limit, limit)
    fractions = (np.arange(_SAMPLES) + 0.5) / _SAMPLES * 2.0 - 1.0           # in (-1, 1)
    u = local_point[:, None, 0] + fractions[None, :] * half[:, None, 0]
    v = local_point[:, None, 1] + fractions[None, :] * half[:, None, 1]
    u = u + rng.standard_normal(u.shape) * spread * pu[:, None]
    v = v + rng.standard_normal(v.shape) * spread * np.minimum(pv, pu * 1.125)[:, None]
    path = thickness / np.maximum(np.abs(local_direction[:, 2]), 1e-3)
    charge = np.repeat(dedx * path / _SAMPLES, _SAMPLES)
    n_u = np.round(2.0 * detector.max_hu[modules] / pu).astype(np.int64)
    n_v = np.round(2.0 * detector.hv[modules] / pv).astype(np.int64)
    ch0 = np.floor((u + detector.max_hu[modules, None]) / pu[:, None]).astype(np.int64)
    ch1 = np.floor((v + detector.hv[modules, None]) / pv[:, None]).astype(np.int64)
    ch0 = np.clip(ch0, 0, np.maximum(n_u - 1, 0)[:, None]).ravel()
    ch1 = np.clip(ch1, 0, np.maximum(n_v - 1, 0)[:, None]).ravel()
    hit = np.repeat(np.arange(n, dtype=np.int64), _SAMPLES)
    key = (hit << 40) | (ch0 << 20) | ch1
    unique, inverse = np.unique(key, return_inverse=True)
    value = np.bincount(inverse, weights=charge, minlength=unique.size)
    hit_u = unique >> 40
    ch0_u = (unique >> 20) & 0xFFFFF
    ch1_u = unique & 0xFFFFF
    strip = pv[hit_u] >= _STRIP_PITCH_V
    peak = np.zeros(n)
    np.maximum.at(peak, hit_u, value)
    keep = strip | (value >= threshold * peak[hit_u])
    hit_u, ch0_u, ch1_u, value = hit_u[keep], ch0_u[keep], ch1_u[keep], value[keep]
    value = np.where(strip[keep], 1.0, value)
    m = modules[hit_u]
    cu, cv = detector.cell_center(m, ch0_u, ch1_u)
    total = np.bincount(hit_u, weights=value, minlength=n)
    centroid = np.stack([np.bincount(hit_u, weights=value * cu, minlength=n),
                         np.bincount(hit_u, weights=value * cv, minlength=n)], 1)
    centroid = centroid.astype(np.float64) / np.maximum(total, 1e-30)[:, None]
    return Clusters(hit_u, ch0_u, ch1_u, value, centroid)
