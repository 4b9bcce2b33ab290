"""Small events for the track tests: a noise-free simulated event and hand-made truth."""

from __future__ import annotations

import numpy as np
import torch

from trkx.tracks.evaluate.event_truth import EventTruth


def noise_free_simulated_record(seed: int = 1, mu: float = 2.0):
    """A simulated event (trkx.data.simulate) with its noise hits removed, as a record whose
    edges are the truth graph with score 1."""
    from trkx.data.record import build_event_record
    from trkx.data.simulate import SimulationConfig, generate_particles, simulate_event

    rng = np.random.default_rng(seed)
    event = simulate_event(generate_particles(mu, rng), rng,
                           SimulationConfig(noise_fraction=0.01))
    truth = event["truth"][event["truth"]["particle_id"].to_numpy() != 0]
    hits = event["hits"][event["hits"]["hit_id"].isin(truth["hit_id"])]
    record = build_event_record(hits, None, event["particles"], truth, use_cells=False,
                                event_id=7)
    record.edge_index = record.track_edges.clone()
    record.scores = torch.ones(record.track_edges.shape[1])
    return record


def broken_after_third_hit(record):
    """``record`` with the truth graph as its edges, scored 1, less the edge after the third
    hit of every particle of >= 9 hits: each long track becomes a 3-hit fragment and the rest."""
    edges = record.track_edges
    pid = record.particle_id[edges[0]]
    keep = torch.ones(edges.shape[1], dtype=torch.bool)
    for particle in torch.unique(pid):
        own = torch.nonzero(pid == particle).flatten()
        if own.numel() >= 8:
            keep[own[2]] = False
    record.edge_index = edges[:, keep]
    record.scores = torch.ones(record.edge_index.shape[1])
    return record


def hand_truth(particle_id, pt=None, eta=None, weight=None, event_id: int = 1,
               production_radius=None, vertex_z=None, layer=None) -> EventTruth:
    """Per-hit truth for hits 1..N of the given particles (nhits computed, weight 1 except
    noise 0 unless given; production radius and vertex z unknown unless given; each hit of a
    particle on a pixel barrel layer of its own unless ``layer`` is given)."""
    particle_id = np.asarray(particle_id, dtype=np.int64)
    n = len(particle_id)
    _, inverse, counts = np.unique(particle_id, return_inverse=True, return_counts=True)
    nhits = np.where(particle_id != 0, counts[inverse], 0)
    if layer is None:       # the k-th hit of its particle on layer 2 (k + 1) of volume 8
        order = np.argsort(inverse, kind="stable")
        rank = np.empty(n, np.int64)
        rank[order] = np.arange(n) - np.repeat(np.cumsum(counts) - counts, counts)
        layer = 8000 + 2 * (rank + 1)
    return EventTruth(
        event_id=event_id,
        hit_id=np.arange(1, n + 1, dtype=np.int64),
        particle_id=particle_id,
        pt=np.asarray(pt if pt is not None else np.where(particle_id != 0, 2.0, 0.0), float),
        eta=np.asarray(eta if eta is not None else np.zeros(n), float),
        nhits=nhits.astype(np.int64),
        weight=np.asarray(weight if weight is not None else (particle_id != 0).astype(float)),
        hit_eta=np.asarray(eta if eta is not None else np.zeros(n), float),
        production_radius=(None if production_radius is None
                           else np.asarray(production_radius, float)),
        vertex_z=None if vertex_z is None else np.asarray(vertex_z, float),
        layer=np.asarray(layer, np.int64),
    )
