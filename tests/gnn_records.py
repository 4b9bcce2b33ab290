"""Small GNN input records built from the real sample event (truth edges + random fakes)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from trkx.data.detector import load_detector
from trkx.data.io import load_event
from trkx.data.record import build_event_record
from trkx.data.record_type import Record
from trkx.data.truth import edge_truth

_CACHE: dict[str, Record] = {}


def sample_record(prefix: Path) -> Record:
    """The sample event's record (hit features, truth, truth graph), built once per session."""
    key = str(prefix)
    if key not in _CACHE:
        hits, cells, particles, truth = load_event(prefix)
        _CACHE[key] = build_event_record(hits, cells, particles, truth,
                                         detector=load_detector())
    return _CACHE[key].clone()


def graph_record(prefix: Path, phi_range: tuple[float, float], fakes_per_true: float,
                 seed: int) -> Record:
    """The hits with ``phi`` in ``phi_range``, their truth edges and random fake edges.

    Fake edges join random pairs of hits of the slice; every edge points inner -> outer (by r).
    ``y``, ``y_pid`` and ``signal`` come from :func:`trkx.data.truth.edge_truth`.
    """
    full = sample_record(prefix)
    phi = full.pos[:, 1]
    keep = (phi >= phi_range[0]) & (phi < phi_range[1])
    new_id = torch.full((full.num_nodes,), -1, dtype=torch.long)
    new_id[keep] = torch.arange(int(keep.sum()))
    truth = full.track_edges
    inside = keep[truth[0]] & keep[truth[1]]
    track_edges = new_id[truth[:, inside]]
    n = int(keep.sum())
    rng = np.random.default_rng(seed)
    n_fake = int(fakes_per_true * track_edges.shape[1])
    fake = torch.from_numpy(rng.integers(0, n, size=(2, n_fake)))
    fake = fake[:, fake[0] != fake[1]]
    edges = torch.cat([track_edges, fake], dim=1)
    r = full.pos[keep, 0]
    outward = r[edges[0]] <= r[edges[1]]
    edges = torch.where(outward, edges, edges.flip(0))
    edges = torch.unique(edges, dim=1)
    particle_id = full.particle_id[keep].numpy()
    signal_hit = full.signal_hit[keep].numpy()
    y, y_pid, signal = edge_truth(edges.numpy(), particle_id, track_edges.numpy(), signal_hit, n)
    record = Record(x=full.x[keep], pos=full.pos[keep], hit_id=full.hit_id[keep],
                  particle_id=full.particle_id[keep],
                  production_radius=full.production_radius[keep], track_edges=track_edges,
                  edge_index=edges,
                  y=torch.from_numpy(y), y_pid=torch.from_numpy(y_pid),
                  signal=torch.from_numpy(signal))
    record.num_nodes = n
    return record
