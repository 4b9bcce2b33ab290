"""The TrackML challenge's per-hit score weights (phase 1 definition).

For a hit ``i`` of particle ``p`` with ``n_p`` hits, ordered by ``|tz - vz|`` (distance along
the beam from the particle's vertex) with 0-based rank ``k``:

    w_i ∝ w_pt(pT_p) * w_order(k, n_p),          sum_i w_i = 1 over the event,

    w_pt(pT) = 0.2 for pT <= 0.5 GeV, rising linearly to 1 at 3 GeV, 1 above
               (0 below 0.05 GeV);
    w_order(k, n) = the proposal (10, 8, 6, 5, 3, 3, 3, 5, 6) stretched linearly over n hits
               (n clamped to 20) and normalised to sum 1 along the track; 0 when n < 4,
               for k >= 20, and for noise (particle_id 0);
    secondaries (particles created in the detector: non-zero low bits of the particle id,
               see ``trkx.data.particle_id``) weigh 0, as in the released challenge data.

Ranks of hits at equal distance are averaged and truncated, as in the challenge's own code, so
the weights equal the challenge's on its events.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from trkx.data.particle_id import is_secondary

ORDER_PROPOSAL = np.array([10.0, 8.0, 6.0, 5.0, 3.0, 3.0, 3.0, 5.0, 6.0])
ORDER_MIN_HITS = 4
ORDER_MAX_HITS = 20


def _order_weight_table() -> np.ndarray:
    """``table[n, k]``: order weight of the k-th hit of an n-hit particle (n clamped to 20)."""
    table = np.zeros((ORDER_MAX_HITS + 1, ORDER_MAX_HITS))
    n_points = len(ORDER_PROPOSAL)
    for n in range(ORDER_MIN_HITS, ORDER_MAX_HITS + 1):
        support = np.arange(n_points) * (n - 1) / (n_points - 1)
        row = np.interp(np.arange(n), support, ORDER_PROPOSAL)
        table[n, :n] = row / row.sum()
    return table


ORDER_WEIGHTS = _order_weight_table()


def pt_weight(pt: np.ndarray, pt_inf: float = 0.5, pt_sup: float = 3.0, w_min: float = 0.2,
              w_max: float = 1.0) -> np.ndarray:
    """Transverse-momentum weight ``w_pt`` (GeV in, dimensionless out)."""
    return np.interp(pt, [min(0.05, pt_inf), pt_inf, pt_sup], [w_min, w_min, w_max],
                     left=0.0, right=w_max)


def hit_weights(truth: pd.DataFrame, particles: pd.DataFrame,
                secondaries_weightless: bool = True) -> np.ndarray:
    """Per-hit weights (aligned with ``truth`` rows) normalised to 1 over the event.

    ``truth`` needs ``particle_id`` and ``tz``; ``particles`` needs ``particle_id``, ``vz``,
    ``px`` and ``py``. With ``secondaries_weightless=False`` the reference library's phase-1
    formula is applied to secondaries too. Returns float64.
    """
    particle_ids = truth["particle_id"].to_numpy()
    table = particles.set_index("particle_id")
    pid_index = table.index.get_indexer(particle_ids)
    known = pid_index >= 0
    px = table["px"].to_numpy(np.float64)
    py = table["py"].to_numpy(np.float64)
    vz = table["vz"].to_numpy(np.float64)
    w_pt = np.where(known, pt_weight(np.hypot(px, py))[pid_index], 0.0)
    distance = np.abs(truth["tz"].to_numpy(np.float64) - np.where(known, vz[pid_index], 0.0))
    grouped = pd.Series(distance).groupby(particle_ids)
    n_hits = grouped.transform("size").to_numpy()
    rank = (grouped.rank(method="average").to_numpy() - 1.0).astype(np.int64)
    n_hits = np.where(particle_ids == 0, 0, n_hits)
    n_clamped = np.minimum(n_hits, ORDER_MAX_HITS)
    valid = (n_hits >= ORDER_MIN_HITS) & (rank < ORDER_MAX_HITS)
    w_order = np.where(valid, ORDER_WEIGHTS[n_clamped, np.minimum(rank, ORDER_MAX_HITS - 1)],
                       0.0)
    weights = w_pt * w_order
    if secondaries_weightless:
        weights = np.where(is_secondary(particle_ids), 0.0, weights)
    total = weights.sum()
    return weights / total if total > 0 else weights
