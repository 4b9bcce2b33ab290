"""Pure GNN inference: node features and edges in, edge scores out (no file access)."""

from __future__ import annotations

import torch
from torch import Tensor

from trkx.gnn.model import InteractionGNN
from trkx.gnn.ops_factory import KernelChooser, build_graph_ops
from trkx.precision import dense_precision, resolve_precision


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
        precision: ``fp32``, ``bf16`` (autocast of the dense layers; sums stay float32) or
            ``auto`` (bf16 where measured faster, :mod:`trkx.precision`).
        edge_attr: [E, a] edge inputs when the model takes them (trkx.gnn.edge_inputs).
    """
    model.eval()
    ops = build_graph_ops(edge_index, x.shape[0], graph_ops, chooser)
    chosen = resolve_precision(precision, x.device, model.hidden)
    with dense_precision(chosen, x.device):
        logits = model(x.float(), ops, None if edge_attr is None else edge_attr.float())
    return torch.sigmoid(logits.float())
