"""The interaction-network edge classifier, written against the GraphOps interface.

With node features ``X`` [N, F], GraphOps ``(S, D)`` of the graph and MLPs ``phi``:

    H_0 = phi_node_enc(X)                                       node encoder     [N, h]
    (H_s, H_d) = (S H_0, D H_0)
    E_0 = phi_edge_enc([H_s, H_d])                              edge encoder     [E, h]
    for t = 1 .. T (``n_graph_iters``):
        (H_s, H_d) = (S H, D H)                                 gather
        E'  = phi_edge([E, H_s, H_d])                           edge net
        (M_in, M_out) = (D^T E', S^T E')                        aggregate (sums)
        H = H + phi_node([M_in, M_out, H])                      node net, residual
        E = E + E'                                              edge residual
    (H_s, H_d) = (S H, D H)
    logits = phi_out([E, H_s, H_d])                             edge logits      [E]

The model reads the graph only through ``ops.gather`` and ``ops.aggregate``; it never sees
``edge_index``, so a distributed GraphOps runs the same code on a rank's block of the graph.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

import torch
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from trkx.gnn.graph_ops import GraphOps

ACTIVATIONS: dict[str, type[nn.Module]] = {"relu": nn.ReLU, "silu": nn.SiLU, "gelu": nn.GELU,
                                           "tanh": nn.Tanh}


def make_mlp(in_features: int, hidden: Sequence[int], out_features: int, activation: str,
             layer_norm: bool, output_activation: bool) -> nn.Sequential:
    """``Linear -> [LayerNorm] -> act`` per hidden layer, then ``Linear`` (optionally the same
    normalisation and activation after it)."""
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation {activation!r} is not one of {', '.join(ACTIVATIONS)}")
    layers: list[nn.Module] = []
    sizes = [in_features, *hidden]
    for a, b in pairwise(sizes):
        layers += [nn.Linear(a, b), *([nn.LayerNorm(b)] if layer_norm else []),
                   ACTIVATIONS[activation]()]
    layers.append(nn.Linear(sizes[-1], out_features))
    if output_activation:
        layers += [*([nn.LayerNorm(out_features)] if layer_norm else []),
                   ACTIVATIONS[activation]()]
    return nn.Sequential(*layers)


class InteractionGNN(nn.Module):
    """Residual interaction network that scores every edge of a graph.

    Args:
        node_features: F, columns of the input node matrix.
        hidden: h, width of node and edge states.
        n_graph_iters: T, message-passing iterations (weights are not shared between them).
        n_mlp_layers: hidden layers in every MLP (encoders, edge/node nets, classifier).
        activation: ``relu``, ``silu``, ``gelu`` or ``tanh``.
        layer_norm: LayerNorm after every hidden Linear.
        checkpoint_iterations: recompute each iteration in the backward pass instead of
            storing its activations (activation checkpointing: ~T x less activation memory
            for ~1 extra forward).
    """

    def __init__(self, node_features: int, hidden: int = 128, n_graph_iters: int = 8,
                 n_mlp_layers: int = 2, activation: str = "relu", layer_norm: bool = True,
                 checkpoint_iterations: bool = False) -> None:
        super().__init__()
        if node_features < 1 or hidden < 1 or n_graph_iters < 0 or n_mlp_layers < 0:
            raise ValueError("node_features and hidden must be >= 1, n_graph_iters and "
                             "n_mlp_layers >= 0")
        self.node_features = node_features
        self.hidden = hidden
        self.n_graph_iters = n_graph_iters
        self.checkpoint_iterations = checkpoint_iterations
        inner = [hidden] * n_mlp_layers

        def mlp(in_features: int, out_features: int = hidden, output_activation: bool = True):
            return make_mlp(in_features, inner, out_features, activation, layer_norm,
                            output_activation)

        self.node_encoder = mlp(node_features)
        self.edge_encoder = mlp(2 * hidden)
        self.edge_nets = nn.ModuleList(mlp(3 * hidden) for _ in range(n_graph_iters))
        self.node_nets = nn.ModuleList(mlp(3 * hidden) for _ in range(n_graph_iters))
        self.classifier = mlp(3 * hidden, 1, output_activation=False)

    def _iteration(self, t: int, h: Tensor, e: Tensor, ops: GraphOps) -> tuple[Tensor, Tensor]:
        h_src, h_dst = ops.gather(h)
        messages = self.edge_nets[t](torch.cat([e, h_src, h_dst], dim=1))
        m_in, m_out = ops.aggregate(messages)
        h = h + self.node_nets[t](torch.cat([m_in.to(h.dtype), m_out.to(h.dtype), h], dim=1))
        return h, e + messages

    def forward(self, x: Tensor, ops: GraphOps) -> Tensor:
        """Edge logits [E] for node features ``x`` [N, F] of the graph behind ``ops``."""
        if x.dim() != 2 or x.shape[1] != self.node_features:
            raise ValueError(f"x must have shape [N, {self.node_features}], got "
                             f"{tuple(x.shape)}")
        if x.shape[0] != ops.num_nodes:
            raise ValueError(f"x has {x.shape[0]} rows but the graph has {ops.num_nodes} nodes")
        h = self.node_encoder(x)
        h_src, h_dst = ops.gather(h)
        e = self.edge_encoder(torch.cat([h_src, h_dst], dim=1))
        for t in range(self.n_graph_iters):
            if self.checkpoint_iterations and torch.is_grad_enabled():
                h, e = checkpoint(self._iteration, t, h, e, ops, use_reentrant=False)
            else:
                h, e = self._iteration(t, h, e, ops)
        h_src, h_dst = ops.gather(h)
        return self.classifier(torch.cat([e, h_src, h_dst], dim=1)).squeeze(1)

    def flops_per_edge_and_node(self) -> tuple[int, int]:
        """Multiply-add FLOPs (2 per MAC) of the dense layers, per edge and per node.

        Every Linear applied row-wise on edges (edge encoder, edge nets, classifier) counts
        per edge, every one on nodes (node encoder, node nets) per node. The sparse products
        add ``f`` FLOPs per edge per gather/aggregate column and are counted separately.
        """
        def dense(module: nn.Module) -> int:
            return sum(2 * m.in_features * m.out_features for m in module.modules()
                       if isinstance(m, nn.Linear))
        per_edge = dense(self.edge_encoder) + dense(self.classifier) + sum(
            dense(net) for net in self.edge_nets)
        per_node = dense(self.node_encoder) + sum(dense(net) for net in self.node_nets)
        return per_edge, per_node
