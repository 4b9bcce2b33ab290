"""Rates in bins (efficiency vs pT, eta, production radius, vertex |z| and the particle's hit
count; fake and duplicate rate vs eta) with intervals.

For a bin holding ``n`` trials of which ``k`` pass, the rate is ``k / n`` and its interval the
Clopper-Pearson (exact binomial) central interval at 68.3% confidence,

    low  = B^{-1}(alpha / 2; k, n - k + 1),   high = B^{-1}(1 - alpha / 2; k + 1, n - k),

with ``B^{-1}`` the inverse regularised incomplete beta function (``low = 0`` when ``k = 0``,
``high = 1`` when ``k = n``). Unlike ``sqrt(p (1 - p) / n)`` it does not shrink to zero width at
rates of 0 or 1, which a nearly perfect tracker gives in most bins.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.special import betaincinv  # scipy.stats's beta.ppf, without its 1 s import

from trkx.data.truth import PROMPT_RADIUS

ONE_SIGMA = 0.6827

PT_BINS = np.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.7, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0, 100.0])  # GeV
ETA_BINS = np.linspace(-4.0, 4.0, 17)
# production radius (mm): the first bin holds the prompt particles (r_v <= PROMPT_RADIUS, all
# counted in it), the others the secondaries out to the last strip layer
RADIUS_BINS = np.array([0.01, 1.0, 10.0, 30.0, 100.0, 300.0, 1100.0])
# hits a particle leaves: 3, 4, 5, 6 apart (the short particles a builder's length cut and
# quality score decide on), then 7-8, 9-10, 11-13, 14-20, and 21 or more (counted at 21-30)
HITS_BINS = np.array([2.5, 3.5, 4.5, 5.5, 6.5, 8.5, 10.5, 13.5, 20.5, 30.5])
# the vertex |z| along the beam (mm): real luminous regions reach sigma_z ~ 55 mm with tails
VERTEX_Z_BINS = np.array([0.0, 25.0, 50.0, 75.0, 100.0, 125.0, 150.0, 200.0, 300.0])


@dataclass(frozen=True, eq=False)
class BinnedRate:
    """k of n in each bin between consecutive ``edges``."""

    edges: np.ndarray
    passed: np.ndarray
    total: np.ndarray

    @property
    def rate(self) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.total > 0, self.passed / np.maximum(self.total, 1), np.nan)

    def interval(self, confidence: float = ONE_SIGMA) -> tuple[np.ndarray, np.ndarray]:
        """Clopper-Pearson bounds per bin (NaN for empty bins)."""
        alpha = 1.0 - confidence
        k, n = self.passed.astype(np.float64), self.total.astype(np.float64)
        with np.errstate(invalid="ignore"):
            low = np.where(k > 0, betaincinv(k, n - k + 1, alpha / 2), 0.0)
            high = np.where(k < n, betaincinv(k + 1, n - k, 1 - alpha / 2), 1.0)
        empty = n == 0
        return np.where(empty, np.nan, low), np.where(empty, np.nan, high)

    def to_dict(self) -> dict[str, list]:
        low, high = self.interval()
        clean = lambda a: [None if not np.isfinite(v) else float(v) for v in a]
        return {"edges": [float(e) for e in self.edges], "passed": self.passed.tolist(),
                "total": self.total.tolist(), "rate": clean(self.rate),
                "low": clean(low), "high": clean(high)}


def binned_rate(values: np.ndarray, passed: np.ndarray, edges: np.ndarray) -> BinnedRate:
    """Histogram ``values`` in ``edges`` and count the ``passed`` entries of each bin."""
    values = np.asarray(values, dtype=np.float64)
    passed = np.asarray(passed, dtype=bool)
    total, _ = np.histogram(values, bins=edges)
    hit, _ = np.histogram(values[passed], bins=edges)
    return BinnedRate(np.asarray(edges, dtype=np.float64), hit, total)


def standard_rates(particles: pd.DataFrame, tracks: pd.DataFrame, pt_min: float,
                   max_eta: float | None, min_hits: int) -> dict[str, BinnedRate]:
    """Efficiency vs pT (no pT cut), vs eta, vs the particle's hit count, vs production
    radius and vs vertex |z| (signal; the last two when the table has production radii and
    vertices), fake and duplicate rate vs eta."""
    found = particles["n_matched_tracks"].to_numpy() > 0
    pt, eta = particles["pt"].to_numpy(), particles["eta"].to_numpy()
    enough = particles["nhits"].to_numpy() >= min_hits
    in_eta = np.ones(len(eta), bool) if max_eta is None else np.abs(eta) <= max_eta
    signal = particles["signal"].to_numpy(bool)
    matched = tracks["matched"].to_numpy(bool)
    rates = {
        "efficiency_vs_pt": binned_rate(pt[enough & in_eta], found[enough & in_eta], PT_BINS),
        "efficiency_vs_eta": binned_rate(eta[signal], found[signal], ETA_BINS),
        "efficiency_vs_particle_hits": binned_rate(
            np.minimum(particles["nhits"].to_numpy()[signal], HITS_BINS[-1] - 0.5),
            found[signal], HITS_BINS),
        "fake_rate_vs_eta": binned_rate(tracks["eta"].to_numpy(), ~matched, ETA_BINS),
        "duplicate_rate_vs_eta": binned_rate(tracks["eta"].to_numpy()[matched],
                                             tracks["duplicate"].to_numpy(bool)[matched],
                                             ETA_BINS),
    }
    radius = (particles["production_radius"].to_numpy(np.float64)
              if "production_radius" in particles else np.full(len(particles), np.nan))
    known = signal & np.isfinite(radius)
    if known.any():
        rates["efficiency_vs_production_radius"] = binned_rate(
            np.where(radius[known] <= PROMPT_RADIUS, RADIUS_BINS[0], radius[known]),
            found[known], RADIUS_BINS)
    vertex_z = (np.abs(particles["vertex_z"].to_numpy(np.float64))
                if "vertex_z" in particles else np.full(len(particles), np.nan))
    known = signal & np.isfinite(vertex_z)
    if known.any():
        rates["efficiency_vs_vertex_z"] = binned_rate(
            np.minimum(vertex_z[known], VERTEX_Z_BINS[-1] - 1.0), found[known], VERTEX_Z_BINS)
    return rates
