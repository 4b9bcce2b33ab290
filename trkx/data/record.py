"""The event graph record passed between stages, and its safe on-disk form.

A record is a ``torch_geometric.data.Data`` with the fields of docs/design.md (``hit_id``, ``x``,
``pos``, truth per hit, ``track_edges``, and per stage ``edge_index``, ``y``, ``y_pid``,
``signal``, ``scores``). On disk it is a plain ``dict[str, Tensor]`` written with ``torch.save``
to a temporary file and renamed, and read back with ``torch.load(weights_only=True)``.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from torch_geometric.data import Data

from trkx.atomic import load_tensors, save_tensors
from trkx.data.detector import Detector
from trkx.data.errors import TrackMLFormatError
from trkx.data.features import cylindrical, hit_features
from trkx.data.truth import SignalCuts, hit_truth, signal_hits, truth_graph, vertex_distance


def _tensor(array: np.ndarray) -> torch.Tensor:
    """A tensor that owns a copy of ``array`` (pandas hands out read-only views)."""
    return torch.from_numpy(np.array(array, copy=True))


def build_event_record(hits: pd.DataFrame, cells: pd.DataFrame | None = None,
                       particles: pd.DataFrame | None = None, truth: pd.DataFrame | None = None,
                       *, detector: Detector | None = None, use_cells: bool = True,
                       signal_cuts: SignalCuts | None = None, event_id: int = -1) -> Data:
    """Hit features and (when truth is given) per-hit truth and the truth graph of one event."""
    x, names = hit_features(hits, cells, detector, use_cells=use_cells and cells is not None)
    r, phi, z, _ = cylindrical(hits["x"], hits["y"], hits["z"])
    data = Data(
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
        data.signal_hit = _tensor(signal_hits(per_hit, signal_cuts or SignalCuts()))
        data.track_edges = _tensor(edges)
    return data


def save_record(data: Data, path: str | os.PathLike) -> Path:
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


def load_record(path: str | os.PathLike) -> Data:
    """Read a record written by :func:`save_record` (``weights_only=True``: no pickled code)."""
    payload = load_tensors(path, "event record")
    if "x" not in payload:
        raise TrackMLFormatError(f"{path}: not an event record (expected a dict with 'x')")
    num_nodes = payload.pop("num_nodes", None)
    data = Data(**payload)
    if num_nodes is not None:
        data.num_nodes = num_nodes
    return data
