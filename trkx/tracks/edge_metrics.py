"""Edge-level efficiency and purity of one stage's graph (docs/design.md, "Figures").

Over unordered hit pairs (an edge given in both directions counts once), with ``K`` the edges
the stage keeps (``score >= cut``; every edge when the record has no ``scores``), ``T_s`` the
signal truth-graph edges (both hits from one signal particle, consecutive on it) and ``T`` all
truth-graph edges:

    efficiency = |K & T_s| / |T_s|,      purity = |K & T| / |K|,

and ``purity_pid`` counts as true any edge joining two hits of one particle (``y_pid``). Errors
are binomial standard errors.
"""

from __future__ import annotations

import numpy as np

from trkx.arrays import as_numpy
from trkx.data.record import EDGE_INDEX, EDGE_TRUTH_SOURCES, SCORES
from trkx.tracks.metrics import binomial


def _pair_keys(edges: np.ndarray, n: int) -> np.ndarray:
    return np.minimum(edges[0], edges[1]) * n + np.maximum(edges[0], edges[1])


def edge_metrics(record, cut: float) -> dict[str, float | int] | None:
    """Edge efficiency and purity of ``record``'s ``edge_index`` (None without edges/truth)."""
    needed = (EDGE_INDEX, *EDGE_TRUTH_SOURCES)
    if any(getattr(record, f, None) is None for f in needed):
        return None
    n = int(record.num_nodes)
    edges = as_numpy(record.edge_index).astype(np.int64)
    keys = _pair_keys(edges, n)
    scores = getattr(record, SCORES, None)
    kept_mask = np.ones(len(keys), bool) if scores is None else as_numpy(scores) >= cut
    kept = np.unique(keys[kept_mask])

    truth = as_numpy(record.track_edges).astype(np.int64)
    truth_keys = np.unique(_pair_keys(truth, n))
    signal_hit = as_numpy(record.signal_hit).astype(bool)
    signal_truth = np.unique(_pair_keys(truth[:, signal_hit[truth[0]] & signal_hit[truth[1]]],
                                        n))
    pid = as_numpy(record.particle_id).astype(np.int64)
    a, b = kept // n, kept % n
    same_particle = (pid[a] == pid[b]) & (pid[a] != 0)

    counts = {"n_edges": len(np.unique(keys)), "n_kept": len(kept),
              "n_signal_truth_edges": len(signal_truth),
              "n_signal_kept": int(np.isin(signal_truth, kept).sum()),
              "n_true_kept": int(np.isin(kept, truth_keys).sum()),
              "n_same_particle_kept": int(same_particle.sum())}
    return _with_rates(None if scores is None else float(cut), counts)


def _with_rates(cut: float | None, counts: dict[str, int]) -> dict[str, float | int | None]:
    efficiency, efficiency_err = binomial(counts["n_signal_kept"],
                                          counts["n_signal_truth_edges"])
    purity, purity_err = binomial(counts["n_true_kept"], counts["n_kept"])
    purity_pid, purity_pid_err = binomial(counts["n_same_particle_kept"], counts["n_kept"])
    return {"cut": cut, **counts,
            "efficiency": efficiency, "efficiency_err": efficiency_err,
            "purity": purity, "purity_err": purity_err,
            "purity_pid": purity_pid, "purity_pid_err": purity_pid_err}


def pool_edge_metrics(per_event: list[dict]) -> dict[str, float | int | None]:
    """Pool per-event :func:`edge_metrics` (counts summed, rates recomputed)."""
    names = ("n_edges", "n_kept", "n_signal_truth_edges", "n_signal_kept", "n_true_kept",
             "n_same_particle_kept")
    counts = {name: sum(int(m[name]) for m in per_event) for name in names}
    return _with_rates(per_event[0]["cut"] if per_event else None, counts)
