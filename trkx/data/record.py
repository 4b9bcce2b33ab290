"""The event graph record passed between stages: its contract, built, written and read.

A record is a :class:`trkx.data.record_type.Record`. Its fields are declared once, here (``FIELDS``:
name, shape, dtype, the stage that adds it, meaning; the table of docs/design.md is this one),
and stage code imports the names and groups from this module. Shapes use N hits, F features, E
candidate edges, T truth-graph edges. Every field but ``x`` is optional (no truth without truth
files, no edges before the embedding stage); a field that is present must have its dtype and a
shape consistent with the others, which :func:`check_record` verifies on every read. The stages
write float32; a float32 field may hold float64 (the float64 equality tests of the distributed
GNN run on such records).

On disk a record is a plain ``dict[str, Tensor]`` written with ``torch.save`` to a temporary
file and renamed, and read back with ``torch.load(weights_only=True)``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from trkx.data.detector import Detector
from trkx.data.features import cylindrical, hit_features
from trkx.data.record_type import Record
from trkx.data.truth import SignalCuts, hit_truth, signal_hits, truth_graph, vertex_distance
from trkx.files.atomic import load_tensors, save_tensors
from trkx.files.errors import TrackMLFormatError


@dataclass(frozen=True)
class Field:
    """One field of the record: ``shape`` in symbols (N, F, E, T) and sizes, one dtype."""

    name: str
    shape: tuple[str | int, ...]
    dtype: torch.dtype
    stage: str          # "data", "embedding", "filter", "gnn": the first stage that writes it
    meaning: str


# names, for stage code (``getattr(record, SCORES, None)``, key tuples)
HIT_ID, X, POS, VOLUME_ID, LAYER_ID, EVENT_ID = ("hit_id", "x", "pos", "volume_id", "layer_id",
                                                 "event_id")
PARTICLE_ID, PT, ETA, NHITS, WEIGHT, SIGNAL_HIT, TRACK_EDGES = (
    "particle_id", "pt", "eta", "nhits", "weight", "signal_hit", "track_edges")
PRODUCTION_RADIUS, VERTEX_Z = "production_radius", "vertex_z"
EDGE_INDEX, Y, Y_PID, SIGNAL, SCORES = "edge_index", "y", "y_pid", "signal", "scores"

FIELDS: tuple[Field, ...] = (
    Field(HIT_ID, ("N",), torch.int64, "data", "TrackML hit id"),
    Field(X, ("N", "F"), torch.float32, "data",
          "model features: scaled r, phi, z, then cluster-shape features with cells"),
    Field(POS, ("N", 3), torch.float32, "data", "r [mm], phi [rad], z [mm]"),
    Field(VOLUME_ID, ("N",), torch.int64, "data", "TrackML volume"),
    Field(LAYER_ID, ("N",), torch.int64, "data", "TrackML layer within the volume"),
    Field(EVENT_ID, (), torch.int64, "data", "event number (-1: unknown)"),
    Field(PARTICLE_ID, ("N",), torch.int64, "data", "truth: particle of the hit, 0 = noise"),
    Field(PT, ("N",), torch.float32, "data", "truth: transverse momentum of the particle [GeV]"),
    Field(ETA, ("N",), torch.float32, "data", "truth: pseudorapidity of the particle"),
    Field(NHITS, ("N",), torch.int64, "data", "truth: hits of the particle"),
    Field(WEIGHT, ("N",), torch.float32, "data", "truth: TrackML score weight of the hit"),
    Field(PRODUCTION_RADIUS, ("N",), torch.float32, "data",
          "truth: the particle's production radius sqrt(vx^2 + vy^2) [mm] (noise: 0); "
          "prompt particles have <= 1 mm (trkx.data.truth.PROMPT_RADIUS)"),
    Field(VERTEX_Z, ("N",), torch.float32, "data",
          "truth: the z of the particle's production vertex [mm] (noise: 0); the efficiency "
          "by vertex |z| (trkx.tracks.evaluate.metrics)"),
    Field(SIGNAL_HIT, ("N",), torch.bool, "data",
          "truth: hit of a signal particle (trkx.data.truth.SignalCuts)"),
    Field(TRACK_EDGES, (2, "T"), torch.int64, "data",
          "truth graph: each particle's hits from its vertex outwards, consecutive hits joined"),
    Field(EDGE_INDEX, (2, "E"), torch.int64, "embedding", "candidate edges, inner -> outer"),
    Field(Y, ("E",), torch.bool, "embedding", "the edge is a truth-graph edge"),
    Field(Y_PID, ("E",), torch.bool, "embedding", "the edge joins two hits of one particle"),
    Field(SIGNAL, ("E",), torch.bool, "embedding", "truth-graph edge of a signal particle"),
    Field(SCORES, ("E",), torch.float32, "filter",
          "the latest edge classifier's score (filter, then replaced by the GNN's)"),
)
FIELD: dict[str, Field] = {f.name: f for f in FIELDS}

#: Per-hit truth (present with truth files); what track evaluation reads.
HIT_TRUTH: tuple[str, ...] = (HIT_ID, PARTICLE_ID, PT, ETA, NHITS, WEIGHT)
#: Truth that edge labels are computed from.
EDGE_TRUTH_SOURCES: tuple[str, ...] = (PARTICLE_ID, TRACK_EDGES, SIGNAL_HIT)
#: Labels of each candidate edge (added with the edges by the embedding stage).
EDGE_LABELS: tuple[str, ...] = (Y, Y_PID, SIGNAL)
#: Every per-edge field: what a stage that drops edges must subset.
EDGE_FIELDS: tuple[str, ...] = (*EDGE_LABELS, SCORES)


def _shape_error(field: Field, value: torch.Tensor, sizes: dict[str, int]) -> str | None:
    if value.dtype != field.dtype and not (field.dtype == torch.float32
                                           and value.dtype == torch.float64):
        return f"dtype {str(value.dtype).removeprefix('torch.')}, expected " \
               f"{str(field.dtype).removeprefix('torch.')}"
    if value.dim() != len(field.shape):
        return f"shape {tuple(value.shape)}, expected [{', '.join(map(str, field.shape))}]"
    for size, symbol in zip(value.shape, field.shape):
        expected = sizes.setdefault(symbol, size) if isinstance(symbol, str) else symbol
        if size != expected:
            where = f" with {symbol}={expected}" if isinstance(symbol, str) else ""
            return (f"shape {tuple(value.shape)}, expected [{', '.join(map(str, field.shape))}]"
                    f"{where}")
    return None


def check_record(data: Record, source: str = "event record") -> None:
    """Raise :class:`TrackMLFormatError` naming ``source`` and the field when a present field of
    ``FIELDS`` has the wrong dtype or a shape inconsistent with the others (N from ``x``, E from
    ``edge_index``), or ``edge_index``/``track_edges`` name hits outside ``[0, N)``."""
    if getattr(data, X, None) is None:
        raise TrackMLFormatError(f"{source}: not an event record (no {X!r})")
    sizes: dict[str, int] = {"N": int(data.x.shape[0])} if data.x.dim() else {}
    for field in FIELDS:
        value = getattr(data, field.name, None)
        if value is None:
            continue
        if not isinstance(value, torch.Tensor):
            raise TrackMLFormatError(f"{source}: field {field.name!r} is not a tensor")
        problem = _shape_error(field, value, sizes)
        if problem:
            raise TrackMLFormatError(f"{source}: field {field.name!r} has {problem} "
                                     "(the record contract: docs/design.md)")
    for name in (EDGE_INDEX, TRACK_EDGES):
        edges = getattr(data, name, None)
        if edges is not None and edges.numel() and (
                int(edges.min()) < 0 or int(edges.max()) >= sizes["N"]):
            raise TrackMLFormatError(f"{source}: {name!r} names hits outside [0, {sizes['N']})")


def _tensor(array: np.ndarray) -> torch.Tensor:
    """A tensor that owns a copy of ``array`` (pandas hands out read-only views)."""
    return torch.from_numpy(np.array(array, copy=True))


def build_event_record(hits: pd.DataFrame, cells: pd.DataFrame | None = None,
                       particles: pd.DataFrame | None = None, truth: pd.DataFrame | None = None,
                       *, detector: Detector | None = None, use_cells: bool = True,
                       signal_cuts: SignalCuts | None = None, event_id: int = -1) -> Record:
    """Hit features and (when truth is given) per-hit truth and the truth graph of one event."""
    x, names = hit_features(hits, cells, detector, use_cells=use_cells and cells is not None)
    r, phi, z, _ = cylindrical(hits["x"], hits["y"], hits["z"])
    data = Record(
        x=_tensor(x),
        pos=_tensor(np.stack([r, phi, z], axis=1).astype(np.float32)),
        hit_id=_tensor(hits["hit_id"].to_numpy(np.int64)),
        volume_id=_tensor(hits["volume_id"].to_numpy(np.int64)),
        layer_id=_tensor(hits["layer_id"].to_numpy(np.int64)),
        event_id=torch.tensor(event_id, dtype=torch.int64),
    )
    data.num_nodes = len(hits)
    data.feature_names = names
    if truth is not None and particles is not None:
        per_hit = hit_truth(hits, truth, particles)
        edges = truth_graph(per_hit["particle_id"].to_numpy(), vertex_distance(per_hit),
                            hits["volume_id"].to_numpy(), hits["layer_id"].to_numpy())
        data.particle_id = _tensor(per_hit["particle_id"].to_numpy(np.int64))
        data.pt = _tensor(per_hit["pt"].to_numpy(np.float32))
        data.eta = _tensor(per_hit["eta"].to_numpy(np.float32))
        data.nhits = _tensor(per_hit["nhits"].to_numpy(np.int64))
        data.weight = _tensor(per_hit["weight"].to_numpy(np.float32))
        data.production_radius = _tensor(np.hypot(per_hit["vx"], per_hit["vy"])
                                         .to_numpy(np.float32))
        data.vertex_z = _tensor(per_hit["vz"].to_numpy(np.float32))
        data.signal_hit = _tensor(signal_hits(per_hit, signal_cuts or SignalCuts()))
        data.track_edges = _tensor(edges)
    return data


def save_record(data: Record, path: str | os.PathLike) -> Path:
    """Write a record atomically as a dict of tensors (plus the feature-name list)."""
    payload: dict[str, object] = {}
    for key, value in data.to_dict().items():
        if isinstance(value, torch.Tensor):
            payload[key] = value.detach().cpu()
        elif key == "feature_names":
            payload[key] = list(value)
        elif key == "num_nodes":
            payload[key] = int(value)
    return save_tensors(payload, path)


def load_record(path: str | os.PathLike) -> Record:
    """Read a record written by :func:`save_record` (``weights_only=True``: no pickled code),
    checked against the contract (:func:`check_record`)."""
    payload = load_tensors(path, "event record")
    if not isinstance(payload, dict) or X not in payload:
        raise TrackMLFormatError(f"{path}: not an event record (expected a dict with 'x')")
    num_nodes = payload.pop("num_nodes", None)
    data = Record(**payload)
    if num_nodes is not None:
        data.num_nodes = num_nodes
    check_record(data, str(path))
    return data
