"""Edge labels and per-stage graph metrics (docs/design.md, "Figures, defined once").

For candidate edges with labels y (truth-graph edge), y_pid (same particle) and signal
(truth edge of a signal particle):

    edge efficiency = #(signal edges kept) / #(signal truth pairs)
    purity          = #(y edges kept) / #(edges kept)          (trkx.edges.figures: one definition)
    purity_pid      = #(y_pid edges kept) / #(edges kept)
    edges per hit   = #(edges kept) / N
"""

from __future__ import annotations

import numpy as np
import torch

from trkx.arrays import as_numpy
from trkx.data.record import EDGE_TRUTH_SOURCES
from trkx.data.record_type import Record
from trkx.data.truth import edge_truth
from trkx.edges.figures import all_kept, edge_efficiency, edge_purity, secondary_edges


def label_edges(record: Record, edge_index: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """``(y, y_pid, signal)`` of ``edge_index`` using the record's truth (trkx.data.truth)."""
    for key in EDGE_TRUTH_SOURCES:
        if getattr(record, key, None) is None:
            raise ValueError(f"event record has no {key!r}: edge labels need truth")
    y, y_pid, signal = edge_truth(as_numpy(edge_index), as_numpy(record.particle_id),
                                  as_numpy(record.track_edges), as_numpy(record.signal_hit),
                                  int(record.num_nodes))
    device = edge_index.device    # labels live where the edges do (CUDA training)
    return tuple(torch.from_numpy(v).to(device) for v in (y, y_pid, signal))


def signal_truth_edges(record: Record, secondary: bool | None = None) -> int:
    """Number of distinct truth-graph pairs whose two hits are signal (with ``secondary``:
    only those of secondary particles (True) or of prompt ones (False), by the record's
    ``production_radius``)."""
    from trkx.data.truth import PROMPT_RADIUS

    edges = as_numpy(record.track_edges)
    signal_hit = as_numpy(record.signal_hit)
    keep = signal_hit[edges[0]] & signal_hit[edges[1]]
    if secondary is not None:
        far = as_numpy(record.production_radius)[edges[0]] > PROMPT_RADIUS
        keep &= far if secondary else ~far
    lo = np.minimum(edges[0, keep], edges[1, keep])
    hi = np.maximum(edges[0, keep], edges[1, keep])
    return int(np.unique(lo * int(record.num_nodes) + hi).size)


def graph_metrics(record: Record, keep: torch.Tensor | None = None) -> dict[str, float]:
    """Efficiency, purity and size of the record's labelled graph (optionally a subset)."""
    y, y_pid, signal = record.y, record.y_pid, record.signal
    if keep is not None:
        y, y_pid, signal = y[keep], y_pid[keep], signal[keep]
    n_edges = int(y.numel())
    kept = all_kept(n_edges, y.device)
    origin = {}
    secondary = secondary_edges(record) if keep is None and getattr(
        record, "edge_index", None) is not None else None
    if secondary is not None:        # edge efficiency of the prompt and secondary particles
        for name, far in (("prompt", False), ("secondary", True)):
            chosen = secondary if far else ~secondary
            origin[f"edge_efficiency_{name}"] = edge_efficiency(
                kept, signal.bool() & chosen.to(signal.device),
                signal_truth_edges(record, secondary=far))
    return {
        "edge_efficiency": edge_efficiency(kept, signal, signal_truth_edges(record)),
        **origin,
        "purity": edge_purity(kept, y),
        "purity_pid": edge_purity(kept, y_pid),
        "edges_per_hit": n_edges / max(int(record.num_nodes), 1),
        "edges": float(n_edges),
    }
