"""Pure GNN inference: node features and edges in, edge scores out (no file access)."""

from __future__ import annotations

import torch
from torch import Tensor

from trkx.gnn.model import InteractionGNN
from trkx.gnn.ops_factory import KernelChooser, build_graph_ops
from trkx.runtime.precision import dense_precision


def drop_isolated_nodes(x: Tensor, edge_index: Tensor) -> tuple[Tensor, Tensor]:
    """``(x[used], edge_index renumbered)`` without the nodes no edge touches.

    An edge's score depends only on the nodes its message passing reaches, so hits without
    an edge (noise, hits whose candidate edges the filter removed: a large share of a
    pile-up-200 event) are pure cost in the node networks; the scores are unchanged.
    """
    used = torch.zeros(x.shape[0], dtype=torch.bool, device=x.device)
    used[edge_index.reshape(-1)] = True
    if bool(used.all()):
        return x, edge_index
    kept = used.nonzero().squeeze(1)
    position = torch.full((x.shape[0],), -1, dtype=edge_index.dtype, device=x.device)
    position[kept] = torch.arange(len(kept), dtype=edge_index.dtype, device=x.device)
    return x[kept], position[edge_index]


@torch.inference_mode()
def score_edges(model: InteractionGNN, x: Tensor, edge_index: Tensor, graph_ops: str = "csr",
                chooser: KernelChooser | None = None, precision: str = "fp32",
                edge_attr: Tensor | None = None) -> Tensor:
    """``sigmoid(model(x, ops))``: the GNN score in [0, 1] of every edge (float32 [E]).

    Args:
        model: a trained :class:`InteractionGNN` (put in eval mode here).
        x: [N, F] node features; edge_index: [2, E] directed edges.
        graph_ops: ``"csr"``, ``"scatter"`` or ``"auto"`` (see :mod:`trkx.gnn.ops_factory`).
        chooser: remembers ``"auto"`` decisions across events.
        precision: ``fp32`` or ``bf16`` (autocast of the dense layers; sums stay float32;
            :mod:`trkx.runtime.precision`).
        edge_attr: [E, a] edge inputs when the model takes them (trkx.gnn.edge_inputs).
    """
    model.eval()
    x, edge_index = drop_isolated_nodes(x, edge_index)
    ops = build_graph_ops(edge_index, x.shape[0], graph_ops, chooser)
    with dense_precision(precision, x.device):
        logits = model(x.float(), ops, None if edge_attr is None else edge_attr.float())
    return torch.sigmoid(logits.float())
