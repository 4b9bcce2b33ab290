"""Edge inputs of the GNN: what is known about each candidate edge before message passing.

For an edge i -> j of the filter-stage graph with filter score s_ij:

    A_ij = [dr, dphi, dz, deta (scaled, trkx.edges.geometry.edge_geometry), s_ij,
            z0, phislope, rphislope (trkx.edges.geometry.edge_trajectory),
            g_i, g_j (trkx.edges.agreement.edge_agreement),
            g'_i, g'_j (trkx.edges.agreement.along_track_agreement)]

A model with ``edge_features = a`` takes the first a columns: 5 (the geometry and the filter
score, the models trained before the trajectory columns existed), 8, 10 or 12. The geometry saves
the network from re-deriving hit differences from encoded node states, the filter score starts
the classifier from the filter's ranking, and the trajectory gives it what a straight line
through the two hits says about the track (its z at the beam line, its turning rate), which an
MLP on differences would have to learn as a division. The agreement says how well the best
continuation of the edge at each of its hits shares its z0 and turning rate (the triplet cue,
which a summed aggregation over mostly fake neighbours dilutes). The along-track agreement says
the same in terms that do not assume the beam line (the dip and the three-hit curvature), so a
secondary's edges, which z0 and phislope mark as fakes, can agree (docs/levers.md).
With ``edge_features = 0`` the model sees node features only.
"""

from __future__ import annotations

import torch
from torch import Tensor

from trkx.data.record_type import Record
from trkx.edges.agreement import both_agreements, edge_agreement
from trkx.edges.geometry import edge_geometry, edge_trajectory, endpoints

EDGE_INPUT_NAMES: tuple[str, ...] = ("dr", "dphi", "dz", "deta", "filter_score",
                                     "z0", "phislope", "rphislope",
                                     "agreement_source", "agreement_target",
                                     "along_source", "along_target")
EDGE_INPUT_FEATURES = len(EDGE_INPUT_NAMES)
#: The widths a model may take: the first 5 (geometry and filter score), 8 (and the
#: trajectory), 10 (and the agreement) or all 12 inputs (and the along-track agreement).
EDGE_INPUT_WIDTHS: tuple[int, ...] = (5, 8, 10, EDGE_INPUT_FEATURES)


def check_edge_input_width(width: int) -> None:
    """A ValueError unless ``width`` is 0 or one of :data:`EDGE_INPUT_WIDTHS`."""
    if width and width not in EDGE_INPUT_WIDTHS:
        raise ValueError(f"edge_features must be 0 or one of {list(EDGE_INPUT_WIDTHS)} (the "
                         f"first edge inputs of {', '.join(EDGE_INPUT_NAMES)}), got {width}")


def edge_inputs(record: Record, label: str = "event record",
                width: int = EDGE_INPUT_FEATURES) -> Tensor:
    """``A`` [E, width] float32 of the record's edges (needs ``pos`` and the filter's
    ``scores``)."""
    check_edge_input_width(width)
    scores = getattr(record, "scores", None)
    pos = getattr(record, "pos", None)
    if scores is None or pos is None:
        missing = "scores (the filter's)" if scores is None else "pos"
        raise ValueError(f"{label}: the GNN uses edge inputs but the record has no {missing}: "
                         "run `trkx infer filter` first")
    if scores.shape[0] != record.edge_index.shape[1]:
        raise ValueError(f"{label}: {scores.shape[0]} scores for "
                         f"{record.edge_index.shape[1]} edges")
    pos, edge_index = pos.float(), record.edge_index.long()
    ends = endpoints(pos, edge_index)           # both ends' (r, phi, z, eta), gathered once
    columns = [edge_geometry(pos, edge_index, ends), scores.float()[:, None]]
    if width > EDGE_INPUT_WIDTHS[0]:
        trajectory = edge_trajectory(pos, edge_index, ends)
        columns.append(trajectory)
        if width > EDGE_INPUT_WIDTHS[2]:       # both agreements, one enumeration
            columns.append(both_agreements(pos, edge_index))
        elif width > EDGE_INPUT_WIDTHS[1]:     # the agreement compares these trajectories
            columns.append(edge_agreement(pos, edge_index))
    return torch.cat(columns, dim=1)


def model_edge_inputs(model, record: Record, label: str = "event record") -> Tensor | None:
    """The edge inputs ``model`` needs (None when it takes none)."""
    width = getattr(model, "edge_features", 0)
    if not width:
        return None
    return edge_inputs(record, label, width)      # checks the width
