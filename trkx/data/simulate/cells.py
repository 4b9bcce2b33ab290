"""Clusters of cells for module crossings, and the measured hit at the cluster centroid.

A track crossing a module at local ``(u0, v0, 0)`` with local unit direction ``d`` traverses
the silicon between ``w = -t/2`` and ``w = +t/2``; the charge made at depth ``w`` is collected
at

    (u, v)(w) = (u0, v0) + (f (d_u, d_v) / d_w + tan(theta_L) (-b_v, b_u)) w,

with ``b`` the field direction (+z) in the module frame:

* Lorentz drift: in the barrels (``b`` along ``v``) the charge drifts along ``u`` by
  ``tan(theta_L) = 0.11`` per unit depth, which shifts the crossing angle of smallest cluster
  width from 0 to ``tan(theta_L)``; in the endcaps ``b`` is along the normal, no drift. The
  drift is taken about the mid-plane, so it changes the cluster width but not its centre;
* ``f`` = 1 in the barrels; in the endcaps the real clusters are as long as the segment of a
  track through ``f`` times the module thickness: ``f = 2.4`` (pixel) and ``1.7`` (strip),
  fitted on the real sample event (with truth momenta: the width of the clusters against the
  track's slope ``t d/d_w`` per volume).

The segment, clipped to 30 pitches, is sampled at ``S = max(8, ceil(8 L))`` equally spaced
points (``L`` its length in pitches along its longer axis, so no crossed cell is skipped), each
carrying ``dE/dx * P / S`` of charge (``P`` the 3-D path length in the silicon); an optional
Gaussian smear of ``cluster_spread`` pitches (default 0: real clusters show no diffusion width)
moves every sample, which lands in cell

    ch0 = floor((u + maxhu) / pitch_u),    ch1 = floor((v + hv) / pitch_v),

clamped to the module's grid. Cells are the distinct channels hit; pixel cells (pitch_v < 1 mm)
keep their charge as ``value`` (cells under ``pixel_threshold`` of the cluster's largest are
dropped; default 0), strip cells get ``value = 1`` as in the TrackML files. With these, the
cluster extents, cell counts and direction features per volume match the real events (see
``cell_shape_tvd`` of benchmarks/sim_vs_real.py). The measured position is the value-weighted
centroid of the cell centres ``((ch0 + 1/2) pitch_u - maxhu, (ch1 + 1/2) pitch_v - hv)`` mapped
back to global coordinates, so the resolution follows from the pitch.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from trkx.data.detector import Detector

_SAMPLES_PER_PITCH = 8   # samples of the segment per pitch of its length (cells it crosses)
_MIN_SAMPLES = 8
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


def segment_slope(detector: Detector, modules: np.ndarray, local_direction: np.ndarray,
                  lorentz: float = 0.11, endcap_depth: tuple[float, float] = (2.4, 1.7),
                  ) -> np.ndarray:
    """``[n, 2]`` change of the collected charge's ``(u, v)`` per unit depth ``w`` (see the
    module docstring): the track slope ``(d_u, d_v) / d_w`` times the depth factor, plus the
    Lorentz drift ``tan(theta_L) (w x b)``."""
    dw = np.where(np.abs(local_direction[:, 2]) < 1e-3, 1e-3, local_direction[:, 2])
    slope = local_direction[:, :2] / dw[:, None]
    field = detector.rotation[modules][:, 2, :]       # the field's (+z) direction, local frame
    along = np.abs(field[:, 2]) > 0.5                 # endcap: normal along the field
    strip = detector.pitch_v[modules] >= _STRIP_PITCH_V
    depth = np.where(along, np.where(strip, endcap_depth[1], endcap_depth[0]), 1.0)
    slope = slope * depth[:, None]
    return slope + lorentz * np.stack([-field[:, 1], field[:, 0]], axis=1)


def make_clusters(detector: Detector, modules: np.ndarray, local_point: np.ndarray,
                  local_direction: np.ndarray, rng: np.random.Generator, dedx: float = 2.0,
                  spread: float = 0.0, threshold: float = 0.0, lorentz: float = 0.11,
                  endcap_depth: tuple[float, float] = (2.4, 1.7)) -> Clusters:
    """Cells and centroids of hits on ``modules`` (see module docstring for the model)."""
    n = modules.size
    thickness = detector.thickness[modules]
    pu, pv = detector.pitch_u[modules], detector.pitch_v[modules]
    pitch = np.stack([pu, pv], 1)
    half = 0.5 * thickness[:, None] * segment_slope(detector, modules, local_direction,
                                                    lorentz, endcap_depth)      # [n, 2]
    limit = _MAX_SEGMENT_PITCHES * pitch
    half = np.clip(half, -limit, limit)
    length = np.max(np.abs(2.0 * half) / pitch, axis=1)                         # in pitches
    samples = np.maximum(_MIN_SAMPLES, np.ceil(_SAMPLES_PER_PITCH * length)).astype(np.int64)
    hit = np.repeat(np.arange(n, dtype=np.int64), samples)
    first = np.cumsum(samples) - samples
    k = np.arange(hit.size) - first[hit]
    fractions = (k + 0.5) / samples[hit] * 2.0 - 1.0                           # in (-1, 1)
    u = local_point[hit, 0] + fractions * half[hit, 0]
    v = local_point[hit, 1] + fractions * half[hit, 1]
    if spread > 0:
        u = u + rng.standard_normal(u.shape) * spread * pu[hit]
        v = v + rng.standard_normal(v.shape) * spread * np.minimum(pv, pu * 1.125)[hit]
    path = thickness / np.maximum(np.abs(local_direction[:, 2]), 1e-3)
    charge = (dedx * path / samples)[hit]
    n_u = np.round(2.0 * detector.max_hu[modules] / pu).astype(np.int64)
    n_v = np.round(2.0 * detector.hv[modules] / pv).astype(np.int64)
    ch0 = np.floor((u + detector.max_hu[modules][hit]) / pu[hit]).astype(np.int64)
    ch1 = np.floor((v + detector.hv[modules][hit]) / pv[hit]).astype(np.int64)
    ch0 = np.clip(ch0, 0, np.maximum(n_u - 1, 0)[hit])
    ch1 = np.clip(ch1, 0, np.maximum(n_v - 1, 0)[hit])
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
