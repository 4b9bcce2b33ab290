"""Edge-level efficiency and purity of one stage's graph (docs/design.md, "Figures").

Over unordered hit pairs (an edge given in both directions counts once), with ``K`` the edges
the stage keeps (``score >= cut``; every edge when the record has no ``scores``), ``T_s`` the
signal truth-graph edges (both hits from one signal particle, consecutive on it) and ``T`` all
truth-graph edges:

    efficiency = |K & T_s| / |T_s|,      purity = |K & T| / |K|,

and ``purity_pid`` counts as true any edge joining two hits of one particle (``y_pid``). Errors
are binomial standard errors.

Where the record holds the hits' ``production_radius``, both populations get their own figures
(the secondaries, made beyond ``PROMPT_RADIUS`` = 1 mm, are lost where the prompt
particles are not): the edge efficiency over each population's signal truth edges
(``efficiency_prompt``, ``efficiency_secondary``), and the share of each population's signal
particles (MetricCuts) that the kept edges leave findable (trkx.tracks.evaluate.findable: the
ceiling of
any track builder on that graph; ``findable_prompt``, ``findable_secondary``).
"""

from __future__ import annotations

import copy

import numpy as np

from trkx.arrays import as_numpy, contained, unique_sorted
from trkx.data.record import EDGE_INDEX, EDGE_TRUTH_SOURCES, SCORES
from trkx.data.truth import PROMPT_RADIUS
from trkx.tracks.evaluate.findable import findable_particles
from trkx.tracks.evaluate.metrics import MetricCuts, binomial

#: Counts every record gives, and those of the two populations (records with production radii).
COUNTS = ("n_edges", "n_kept", "n_signal_truth_edges", "n_signal_kept", "n_true_kept",
          "n_same_particle_kept")
#: What the populations' figures read beyond the radius (the findable shares: edge labels and
#: the signal particles' pT, eta and hit count).
POPULATION_SOURCES = ("y", "pt", "eta", "nhits")
POPULATION_COUNTS = tuple(f"{name}_{population}" for population in ("prompt", "secondary")
                          for name in ("n_signal_truth_edges", "n_signal_kept",
                                       "n_signal_particles", "n_findable"))


def _pair_keys(edges: np.ndarray, n: int) -> np.ndarray:
    return np.minimum(edges[0], edges[1]) * n + np.maximum(edges[0], edges[1])


def edge_metrics(record, cut: float,
                 cuts: MetricCuts | None = None) -> dict[str, float | int] | None:
    """Edge efficiency and purity of ``record``'s ``edge_index`` (None without edges/truth),
    split by population with production radii (``cuts``: the signal particles of the
    findable shares)."""
    needed = (EDGE_INDEX, *EDGE_TRUTH_SOURCES)
    if any(getattr(record, f, None) is None for f in needed):
        return None
    n = int(record.num_nodes)
    edges = as_numpy(record.edge_index).astype(np.int64)
    keys = _pair_keys(edges, n)
    scores = getattr(record, SCORES, None)
    kept_mask = np.ones(len(keys), bool) if scores is None else as_numpy(scores) >= cut
    kept = unique_sorted(keys[kept_mask])

    truth = as_numpy(record.track_edges).astype(np.int64)
    truth_keys = unique_sorted(_pair_keys(truth, n))
    signal_hit = as_numpy(record.signal_hit).astype(bool)
    signal_truth = unique_sorted(_pair_keys(truth[:, signal_hit[truth[0]] & signal_hit[truth[1]]],
                                            n))
    pid = as_numpy(record.particle_id).astype(np.int64)
    a, b = kept // n, kept % n
    same_particle = (pid[a] == pid[b]) & (pid[a] != 0)

    signal_kept = contained(signal_truth, kept)
    counts = {"n_edges": len(kept) if kept_mask.all() else len(unique_sorted(keys)),
              "n_kept": len(kept),
              "n_signal_truth_edges": len(signal_truth),
              "n_signal_kept": int(signal_kept.sum()),
              "n_true_kept": int(contained(kept, truth_keys).sum()),
              "n_same_particle_kept": int(same_particle.sum())}
    radius = getattr(record, "production_radius", None)
    if radius is not None and all(getattr(record, key, None) is not None
                                  for key in POPULATION_SOURCES):
        counts.update(_population_counts(record, as_numpy(radius), signal_truth, signal_kept,
                                         n, kept_mask, cuts))
    return _with_rates(None if scores is None else float(cut), counts)


def _population_counts(record, radius: np.ndarray, signal_truth: np.ndarray,
                       edge_kept: np.ndarray, n: int, kept_mask: np.ndarray,
                       cuts: MetricCuts | None) -> dict[str, int]:
    """Signal truth edges kept (``edge_kept``, per key of ``signal_truth``) and signal
    particles findable, prompt and secondary."""
    secondary_edge = radius[signal_truth // n] > PROMPT_RADIUS
    graph = copy.copy(record)                   # shallow: only the kept edges are replaced
    graph.edge_index = record.edge_index[:, kept_mask]
    graph.y = record.y[kept_mask]
    particles, findable = findable_particles(graph, cuts)
    pid = as_numpy(record.particle_id).astype(np.int64)
    first = np.unique(pid, return_index=True)
    secondary_particle = radius[first[1][np.searchsorted(first[0], particles)]] > PROMPT_RADIUS
    counts = {}
    for population, edge_mask, particle_mask in (
            ("prompt", ~secondary_edge, ~secondary_particle),
            ("secondary", secondary_edge, secondary_particle)):
        counts[f"n_signal_truth_edges_{population}"] = int(edge_mask.sum())
        counts[f"n_signal_kept_{population}"] = int((edge_kept & edge_mask).sum())
        counts[f"n_signal_particles_{population}"] = int(particle_mask.sum())
        counts[f"n_findable_{population}"] = int((findable & particle_mask).sum())
    return counts


def _with_rates(cut: float | None, counts: dict[str, int]) -> dict[str, float | int | None]:
    efficiency, efficiency_err = binomial(counts["n_signal_kept"],
                                          counts["n_signal_truth_edges"])
    purity, purity_err = binomial(counts["n_true_kept"], counts["n_kept"])
    purity_pid, purity_pid_err = binomial(counts["n_same_particle_kept"], counts["n_kept"])
    rates = {"efficiency": efficiency, "efficiency_err": efficiency_err,
             "purity": purity, "purity_err": purity_err,
             "purity_pid": purity_pid, "purity_pid_err": purity_pid_err}
    if all(name in counts for name in POPULATION_COUNTS):
        for population in ("prompt", "secondary"):
            for rate, kept, total in (("efficiency", "n_signal_kept", "n_signal_truth_edges"),
                                      ("findable", "n_findable", "n_signal_particles")):
                value, error = binomial(counts[f"{kept}_{population}"],
                                        counts[f"{total}_{population}"])
                rates[f"{rate}_{population}"] = value
                rates[f"{rate}_{population}_err"] = error
    return {"cut": cut, **counts, **rates}


def pool_edge_metrics(per_event: list[dict]) -> dict[str, float | int | None]:
    """Pool per-event :func:`edge_metrics` (counts summed, rates recomputed; the populations'
    when every event has them)."""
    names = COUNTS + (POPULATION_COUNTS if all(POPULATION_COUNTS[0] in m for m in per_event)
                      else ())
    counts = {name: sum(int(m[name]) for m in per_event) for name in names}
    return _with_rates(per_event[0]["cut"] if per_event else None, counts)
