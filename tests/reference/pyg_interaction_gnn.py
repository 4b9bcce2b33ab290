"""The same interaction network written the usual PyG way (``MessagePassing``, scatter-sum).

It has exactly the parameter layout of :class:`~trkx.gnn.model.InteractionGNN`
(``reference.load_state_dict(model.state_dict())`` works), so it serves as

* the independent reference the tests compare ``InteractionGNN`` against (same parameters must
  give the same edge logits), and
* the baseline ``benchmarks/gnn.py`` (commit 0eb1b96; figures in docs/levers.md, "Retired
  studies") timed ``InteractionGNN`` against, side by side.

One iteration as a ``MessagePassing`` layer (``flow="source_to_target"``: ``x_j`` is the source
``s_k``, ``x_i`` the destination ``d_k``)::

    message(x_i, x_j, e) = phi_edge([e, x_j, x_i])                  = E'
    M_in  = sum over edges into each node of E'       (PyG aggregate on the target index)
    M_out = sum over edges out of each node of E'     (the same aggregation on the source index)
    update: H + phi_node([M_in, M_out, H]);  E + E'
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch_geometric.nn import MessagePassing

from trkx.gnn.model import InteractionGNN


class InteractionLayer(MessagePassing):
    """One interaction-network iteration as a PyG ``MessagePassing`` layer (``aggr``: PyG's
    ``add`` or ``mean``)."""

    def __init__(self, edge_net: nn.Module, node_net: nn.Module, aggr: str = "add") -> None:
        super().__init__(aggr=aggr, flow="source_to_target")
        self.edge_net = edge_net
        self.node_net = node_net

    def message(self, x_i: Tensor, x_j: Tensor, e: Tensor) -> Tensor:  # type: ignore[override]
        self._messages = self.edge_net(torch.cat([e, x_j, x_i], dim=1))
        return self._messages

    def forward(self, h: Tensor, e: Tensor, edge_index: Tensor) -> tuple[Tensor, Tensor]:
        num_nodes = h.shape[0]
        m_in = self.propagate(edge_index, x=h, e=e, size=(num_nodes, num_nodes))
        messages, self._messages = self._messages, None
        m_out = self.aggregate(messages, edge_index[0], dim_size=num_nodes)
        h = h + self.node_net(torch.cat([m_in, m_out, h], dim=1))
        return h, e + messages


class PygInteractionGNN(nn.Module):
    """:class:`InteractionGNN` written with PyG ``MessagePassing``; same constructor arguments
    (except activation checkpointing) and the same ``state_dict`` keys."""

    def __init__(self, node_features: int, hidden: int = 128, n_graph_iters: int = 8,
                 n_mlp_layers: int = 2, activation: str = "relu",
                 layer_norm: bool = True, aggregation: str = "sum") -> None:
        super().__init__()
        template = InteractionGNN(node_features, hidden, n_graph_iters, n_mlp_layers,
                                  activation, layer_norm)
        self.node_encoder = template.node_encoder
        self.edge_encoder = template.edge_encoder
        self.edge_nets = template.edge_nets
        self.node_nets = template.node_nets
        self.classifier = template.classifier
        aggr = {"sum": "add", "mean": "mean"}[aggregation]
        self.layers = [InteractionLayer(en, nn_, aggr) for en, nn_ in zip(self.edge_nets,
                                                                           self.node_nets)]

    def forward(self, x: Tensor, edge_index: Tensor) -> Tensor:
        """Edge logits [E] for node features ``x`` [N, F] and directed ``edge_index`` [2, E]."""
        src, dst = edge_index
        h = self.node_encoder(x)
        e = self.edge_encoder(torch.cat([h[src], h[dst]], dim=1))
        for layer in self.layers:
            h, e = layer(h, e, edge_index)
        return self.classifier(torch.cat([e, h[src], h[dst]], dim=1)).squeeze(1)
