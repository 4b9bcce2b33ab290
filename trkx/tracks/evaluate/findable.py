"""Which signal particles a graph still holds: the track builder's ceiling on that graph.

A signal particle ``p`` (:class:`~trkx.tracks.evaluate.metrics.MetricCuts`: ``pT >= pt_min``,
``>= min_hits`` hits on ``>= min_layers`` distinct layers, ``|eta| <= max_eta`` when set)
with ``n_p`` hits is *findable* in a graph
``G`` when its hits joined by ``G``'s true edges of ``p`` form one connected piece that a
double-majority match accepts:

    E_p = {(i, j) in G : particle(i) = particle(j) = p, y_ij = 1},
    C_p = the largest connected component of p's hits under E_p (undirected),
    findable(p)  <=>  2 |C_p| > n_p  and  |C_p| >= min_track_hits.

``y_ij`` is the truth-graph label of the edge (hits of consecutive layers of one particle,
trkx.data.truth); with ``same_particle=True`` every edge joining two hits of ``p`` counts,
also those that skip a layer (``y_pid``). A builder that makes ``C_p`` one track (with nothing
else) matches ``p``; no builder that only joins hits along the graph's edges can match a particle
that is not findable. The findable share is ``#findable / #signal``; with truth scores (1 on
``y`` edges, 0 elsewhere) and ``min_length <= 3`` the walkthrough reaches it exactly on the
pile-up-200 filter graphs (docs/tracks.md).
"""

from __future__ import annotations

import numpy as np

from trkx.arrays import as_numpy
from trkx.data.truth import layer_key
from trkx.tracks.builder.components import component_labels
from trkx.tracks.evaluate.event_truth import distinct_layers
from trkx.tracks.evaluate.metrics import MetricCuts


def findable_particles(record, cuts: MetricCuts | None = None,
                       same_particle: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """``(signal particle ids, findable flags)`` of an event record with ``edge_index``,
    ``y`` (or ``y_pid`` with ``same_particle``) and the per-hit truth (``particle_id``,
    ``pt``, ``eta``, ``nhits``); see the module docstring."""
    cuts = cuts if cuts is not None else MetricCuts()
    pid = as_numpy(record.particle_id).astype(np.int64)
    n = len(pid)
    src, dst = as_numpy(record.edge_index).astype(np.int64)
    true = as_numpy(record.y_pid if same_particle else record.y).astype(bool)
    own = true & (pid[src] == pid[dst]) & (pid[src] != 0)
    component = component_labels(n, src[own], dst[own])
    nhits = as_numpy(record.nhits).astype(np.int64)
    n_layers = None
    if cuts.min_layers:
        if getattr(record, "volume_id", None) is None or getattr(record, "layer_id", None) is None:
            raise ValueError("min_layers needs the hits' detector layers (volume_id, layer_id)")
        layer = layer_key(as_numpy(record.volume_id), as_numpy(record.layer_id))
        pids = np.unique(pid[pid != 0])
        per_particle = distinct_layers(pid[pid != 0], layer[pid != 0], pids)
        n_layers = np.zeros(n, dtype=np.int64)
        n_layers[pid != 0] = per_particle[np.searchsorted(pids, pid[pid != 0])]
    signal_hit = (pid != 0) & cuts.signal(as_numpy(record.pt).astype(np.float64),
                                          as_numpy(record.eta).astype(np.float64), nhits,
                                          n_layers)
    hits = np.flatnonzero(signal_hit)
    particles, first = np.unique(pid[hits], return_index=True)
    if len(particles) == 0:
        return particles, np.zeros(0, dtype=bool)
    pairs, sizes = np.unique(np.stack([pid[hits], component[hits]]), axis=1,
                             return_counts=True)
    largest = np.zeros(len(particles), dtype=np.int64)
    np.maximum.at(largest, np.searchsorted(particles, pairs[0]), sizes)
    n_p = nhits[hits[first]]
    return particles, (2 * largest > n_p) & (largest >= cuts.min_track_hits)


def findable_share(records, cuts: MetricCuts | None = None,
                   same_particle: bool = False) -> tuple[float, int, int]:
    """``(share, findable, signal)`` over the records pooled."""
    found = total = 0
    for record in records:
        _, flags = findable_particles(record, cuts, same_particle)
        found += int(flags.sum())
        total += len(flags)
    return (found / total if total else float("nan")), found, total
