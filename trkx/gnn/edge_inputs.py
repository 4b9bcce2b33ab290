"""Edge inputs of the GNN: what is known about each candidate edge before message passing.

For an edge i -> j of the filter-stage graph with filter score s_ij:

    A_ij = [dr, dphi, dz, deta (scaled, trkx.edge_geometry.edge_geometry), s_ij]

The geometry saves the network from re-deriving hit differences from encoded node states, and
the filter score starts the classifier from the filter's ranking, which message passing then
refines. With ``edge_features = 0`` the model sees node features only.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch_geometric.data import Data

from trkx.edge_geometry import edge_geometry

EDGE_INPUT_NAMES: tuple[str, ...] = ("dr", "dphi", "dz", "deta", "filter_score")
EDGE_INPUT_FEATURES = len(EDGE_INPUT_NAMES)


def edge_inputs(record: Data, label: str = "event record") -> Tensor:
    """``A`` [E, 5] float32 of the record's edges (needs ``pos`` and the filter's ``scores``)."""
    scores = getattr(record, "scores", None)
    pos = getattr(record, "pos", None)
    if scores is None or pos is None:
        missing = "scores (the filter's)" if scores is None else "pos"
        raise ValueError(f"{label}: the GNN uses edge inputs but the record has no {missing}: "
                         "run `trkx infer filter` first")
    if scores.shape[0] != record.edge_index.shape[1]:
        raise ValueError(f"{label}: {scores.shape[0]} scores for "
                         f"{record.edge_index.shape[1]} edges")
    geometry = edge_geometry(pos.float(), record.edge_index.long())
    return torch.cat([geometry, scores.float()[:, None]], dim=1)


def model_edge_inputs(model, record: Data, label: str = "event record") -> Tensor | None:
    """The edge inputs ``model`` needs (None when it takes none)."""
    if not getattr(model, "edge_features", 0):
        return None
    if model.edge_features != EDGE_INPUT_FEATURES:
        raise ValueError(f"the model expects {model.edge_features} edge inputs, trkx provides "
                         f"{EDGE_INPUT_FEATURES} ({', '.join(EDGE_INPUT_NAMES)})")
    return edge_inputs(record, label)
