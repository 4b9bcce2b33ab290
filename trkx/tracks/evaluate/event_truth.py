"""Per-hit truth of one event, in the form the metrics need, from a record or TrackML frames.

Besides the particle of each hit (``particle_id``, its ``pt`` in GeV and vertex ``eta``, its
hit count ``nhits`` in this event, the hit's score ``weight``), the metrics need a geometric
pseudorapidity per hit to place tracks that match no particle (fakes):

    eta_hit = asinh(z / r),   r = sqrt(x^2 + y^2)   (as seen from the origin).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pandas as pd

from trkx.arrays import as_numpy
from trkx.data.record import HIT_TRUTH, LAYER_ID, PRODUCTION_RADIUS, VERTEX_Z, VOLUME_ID
from trkx.data.truth import hit_truth, layer_key

_RECORD_FIELDS = HIT_TRUTH


@dataclass(frozen=True, eq=False)
class EventTruth:
    """Per-hit truth arrays of one event (all of length N)."""

    event_id: int
    hit_id: np.ndarray        # int64
    particle_id: np.ndarray   # int64, 0 = noise
    pt: np.ndarray            # float64, GeV
    eta: np.ndarray           # float64, particle pseudorapidity at its vertex
    nhits: np.ndarray         # int64, hits of the hit's particle in this event
    weight: np.ndarray        # float64, TrackML hit weight
    hit_eta: np.ndarray       # float64, asinh(z / r) of the hit position
    # float64, production radius of the hit's particle [mm]; NaN where the source has none
    # (records written before the field)
    production_radius: np.ndarray | None = None
    # float64, z of the hit's particle's production vertex [mm]; NaN where the source has none
    vertex_z: np.ndarray | None = None
    # int64, the hit's detector layer (trkx.data.truth.layer_key); -1 where the source has none
    layer: np.ndarray | None = None

    def __post_init__(self) -> None:
        for name in ("production_radius", "vertex_z"):
            if getattr(self, name) is None:
                object.__setattr__(self, name, np.full(len(self.hit_id), np.nan))
        if self.layer is None:
            object.__setattr__(self, "layer", np.full(len(self.hit_id), -1, dtype=np.int64))

    @cached_property
    def particles(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per particle with hits (noise left out): its id (ascending), the row of its first
        hit and its distinct layers (:func:`distinct_layers`). Made once per truth: a tuner
        evaluates the same event at many working points."""
        particle_hits = self.particle_id != 0
        pids, first = np.unique(self.particle_id[particle_hits], return_index=True)
        rows = np.flatnonzero(particle_hits)[first]
        return pids, rows, distinct_layers(self.particle_id[particle_hits],
                                           self.layer[particle_hits], pids)

    def subset(self, mask: np.ndarray) -> EventTruth:
        """The truth of the hits ``mask`` selects."""
        return EventTruth(self.event_id, self.hit_id[mask], self.particle_id[mask],
                          self.pt[mask], self.eta[mask], self.nhits[mask], self.weight[mask],
                          self.hit_eta[mask], self.production_radius[mask],
                          self.vertex_z[mask], self.layer[mask])

    def frame(self) -> pd.DataFrame:
        """``hit_id, particle_id, weight``: the truth table :mod:`trkx.tracks.evaluate.score`
        reads."""
        return pd.DataFrame({"hit_id": self.hit_id, "particle_id": self.particle_id,
                             "weight": self.weight})

    def __len__(self) -> int:
        return len(self.hit_id)


def distinct_layers(particle_id: np.ndarray, layer: np.ndarray, pids: np.ndarray,
                    ) -> np.ndarray:
    """Per particle of ``pids`` (sorted), the distinct layers among its hits (``particle_id``,
    ``layer`` per hit; a layer of -1, unknown, counts as none)."""
    known = layer >= 0
    pairs = np.unique(np.stack([particle_id[known], layer[known]]), axis=1)
    counts = np.zeros(len(pids), dtype=np.int64)
    if pairs.shape[1]:
        owners, n = np.unique(pairs[0], return_counts=True)
        counts[np.searchsorted(pids, owners)] = n
    return counts


def has_truth(record) -> bool:
    """Whether ``record`` carries every truth field that track evaluation reads."""
    return all(getattr(record, f, None) is not None for f in _RECORD_FIELDS)


def truth_from_record(record, label: str = "record") -> EventTruth:
    """Per-hit truth of an event graph record (it must carry the truth fields)."""
    missing = [f for f in _RECORD_FIELDS if getattr(record, f, None) is None]
    if missing:
        raise ValueError(f"{label}: the event record has no truth field(s) {', '.join(missing)}"
                         " (evaluation needs hit_id, particle_id, pt, eta, nhits, weight)")
    pos = getattr(record, "pos", None)
    if pos is not None:
        pos = as_numpy(pos).astype(np.float64)
        hit_eta = np.arcsinh(pos[:, 2] / np.maximum(pos[:, 0], 1e-9))
    else:
        hit_eta = as_numpy(record.eta).astype(np.float64)
    event_id = getattr(record, "event_id", None)
    return EventTruth(
        event_id=int(event_id) if event_id is not None else -1,
        hit_id=as_numpy(record.hit_id).astype(np.int64),
        particle_id=as_numpy(record.particle_id).astype(np.int64),
        pt=as_numpy(record.pt).astype(np.float64),
        eta=as_numpy(record.eta).astype(np.float64),
        nhits=as_numpy(record.nhits).astype(np.int64),
        weight=as_numpy(record.weight).astype(np.float64),
        hit_eta=hit_eta,
        production_radius=_optional(record, PRODUCTION_RADIUS),
        vertex_z=_optional(record, VERTEX_Z),
        layer=(None if getattr(record, VOLUME_ID, None) is None
               or getattr(record, LAYER_ID, None) is None else
               layer_key(as_numpy(record.volume_id), as_numpy(record.layer_id))),
    )


def _optional(record, name: str) -> np.ndarray | None:
    """The float64 per-hit field ``name`` of ``record``, or None where it has none."""
    value = getattr(record, name, None)
    return None if value is None else as_numpy(value).astype(np.float64)


def truth_from_frames(event_id: int, hits: pd.DataFrame, particles: pd.DataFrame,
                      truth: pd.DataFrame) -> EventTruth:
    """Per-hit truth from the TrackML ``hits``, ``particles`` and ``truth`` tables."""
    per_hit = hit_truth(hits, truth, particles)
    x, y, z = (hits[c].to_numpy(np.float64) for c in ("x", "y", "z"))
    return EventTruth(
        event_id=int(event_id),
        hit_id=hits["hit_id"].to_numpy(np.int64),
        particle_id=per_hit["particle_id"].to_numpy(np.int64),
        pt=per_hit["pt"].to_numpy(np.float64),
        eta=per_hit["eta"].to_numpy(np.float64),
        nhits=per_hit["nhits"].to_numpy(np.int64),
        weight=per_hit["weight"].to_numpy(np.float64),
        hit_eta=np.arcsinh(z / np.maximum(np.hypot(x, y), 1e-9)),
        production_radius=np.hypot(per_hit["vx"], per_hit["vy"]).to_numpy(np.float64),
        vertex_z=per_hit["vz"].to_numpy(np.float64),
        layer=(layer_key(hits["volume_id"], hits["layer_id"])
               if {"volume_id", "layer_id"} <= set(hits.columns) else None),
    )
