"""Filter inference: score every edge in bounded-memory chunks, keep those above the cut.

    score_e = sigmoid(FilterMLP(edge_features(e))),   kept = { e : score_e >= score_cut }.

Edge features are built ``chunk_size`` edges at a time, so memory stays O(chunk_size) beyond the
graph itself (an event with 2M edges and 30 features would otherwise need ~0.25 GB at once).
"""

from __future__ import annotations

import copy

import torch

from trkx.data.record import EDGE_LABELS
from trkx.data.record_type import Record
from trkx.filter.features import compiled, edge_features, has_cell_directions, hit_table
from trkx.filter.model import FilterMLP
from trkx.runtime.precision import dense_precision


@torch.no_grad()
def score_edges(network: FilterMLP, record: Record, chunk_size: int | None = 500_000,
                precision: str = "fp32") -> torch.Tensor:
    """Scores [E] of ``record.edge_index``, on the device of ``record.x`` (the network's);
    ``chunk_size=None`` scores all edges at once; ``precision`` of the dense layers: fp32 or
    bf16 (:mod:`trkx.runtime.precision`)."""
    network.eval()
    device = record.x.device
    names = getattr(record, "feature_names", None) if network.cell_agreement else None
    if network.cell_agreement and not has_cell_directions(names):
        raise ValueError("this filter was trained with cell features (cell_agreement) but the "
                         "event record has none: build records with use_cells")
    edge_index = record.edge_index
    total = edge_index.shape[1]
    step = max(total if not chunk_size else int(chunk_size), 1)
    scores = torch.empty(total, device=device)      # written chunk by chunk: no final cat
    kernel = compiled(record.x)
    # the compiled features: the hit table once per event, one buffer for every chunk
    table = hit_table(record.x, record.pos, names, network.hit_features) if kernel else None
    buffer = (torch.empty(min(step, total), network.in_features, device=device) if kernel
              else None)
    for start in range(0, total, step):
        chunk = edge_index[:, start:start + step]
        features = edge_features(record.x, record.pos, chunk, names, network.hit_features,
                                 network.trajectory, table=table, out=buffer)
        with dense_precision(precision, device):
            logits = network(features)              # row blocks, in place (FilterMLP)
        torch.sigmoid(logits.float(), out=scores[start:start + step])
    return scores


def apply_cut(record: Record, scores: torch.Tensor, score_cut: float) -> Record:
    """A copy of ``record`` keeping the edges with score >= ``score_cut``, with ``scores``."""
    keep = scores >= score_cut
    out = copy.copy(record)             # shallow: hit tensors shared, edge tensors replaced
    out.edge_index = record.edge_index[:, keep]
    out.scores = scores[keep]
    for key in EDGE_LABELS:
        value = getattr(record, key, None)
        if value is not None:
            setattr(out, key, value[keep])
    return out


def filter_graph(network: FilterMLP, record: Record, score_cut: float = 0.5,
                 chunk_size: int | None = 500_000, precision: str = "fp32") -> Record:
    """Score (chunked) and cut: the filtered record."""
    return apply_cut(record, score_edges(network, record, chunk_size, precision), score_cut)
