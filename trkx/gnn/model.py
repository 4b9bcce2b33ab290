"""The interaction-network edge classifier, written against the GraphOps interface.

With node features ``X`` [N, F], GraphOps ``(S, D)`` of the graph and MLPs ``phi``:

    H_0 = phi_node_enc(X)                                       node encoder     [N, h]
    (H_s, H_d) = (S H_0, D H_0)
    E_0 = phi_edge_enc([A, H_s, H_d])                           edge encoder     [E, h]
    for t = 1 .. T (``n_graph_iters``):
        (H_s, H_d) = (S H, D H)                                 gather
        E'  = phi_edge([E, H_s, H_d])                           edge net
        (M_in, M_out) = (D^T E', S^T E')                        aggregate (sums)
        (M_in, M_out) = (M_in / d_in, M_out / d_out)            ``aggregation="mean"`` only
        H = H + phi_node([M_in, M_out, H])                      node net, residual
        E = E + E'                                              edge residual
    (H_s, H_d) = (S H, D H)
    logits = phi_out([E, H_s, H_d])                             edge logits      [E]

With ``aggregation="mean"`` the sums are divided by the node's in- and out-degree
``(d_in, d_out) = (D^T 1, S^T 1)`` (at least 1), so the node net sees messages of the same
scale whatever the hit density: a hit among many candidate edges (inner layers, high pile-up,
a whole event at inference) and one among few (a sampled training subgraph). The degrees are
one more ``aggregate`` of a column of ones, so every GraphOps, distributed ones included,
computes them the way it computes the sums.

``A`` [E, a] are optional edge inputs (``edge_features = a``, 0: none), e.g. the edge geometry
and the filter's score (trkx.gnn.edge_inputs). The model reads the graph only through
``ops.gather`` and ``ops.aggregate``; it never sees
``edge_index``, so a distributed GraphOps runs the same code on a rank's block of the graph.

Node-side projection. The first Linear of every MLP over ``[E, H_s, H_d]`` splits by input
block, ``W [E, S H, D H] + b = W_e E + S (H W_s^T) + D (H W_d^T) + b``, so the source and
destination blocks are applied on the N node rows (``P = H [W_s; W_d]^T``, [N, 2o]) and only
then gathered (``(S P)[:, :o] + (D P)[:, o:]``), instead of on the E > N edge rows after a
concatenation. Same function and parameters (the tests compare it with the plain PyG version),
``2 h o`` fewer multiply-adds per edge and MLP and no [E, 3h] concatenation; the price is a
gathered width of ``2o`` instead of ``h`` (twice the halo words in a distributed run), hence
the ``node_side_projection`` switch.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

import torch
from torch import Tensor, nn
from torch.nn import functional as F
from torch.utils.checkpoint import checkpoint

from trkx.gnn.graph_ops import GraphOps
from trkx.runtime.block_threads import for_blocks
from trkx.runtime.device import row_blocked
from trkx.runtime.fused_mlp import Buffers, MLPPlan, fused_precision, plan, run_layers

AGGREGATIONS: tuple[str, ...] = ("sum", "mean")
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
        node_features: F, the leading columns of the input node matrix it reads (a record may
            carry more, e.g. cluster shapes after (r, phi, z): a model of 3 reads positions).
        hidden: h, width of node and edge states.
        n_graph_iters: T, message-passing iterations (weights are not shared between them).
        n_mlp_layers: hidden layers in every MLP (encoders, edge/node nets, classifier).
        activation: ``relu``, ``silu``, ``gelu`` or ``tanh``.
        layer_norm: LayerNorm after every hidden Linear.
        checkpoint_iterations: recompute each iteration in the backward pass instead of
            storing its activations (activation checkpointing: ~T x less activation memory
            for ~1 extra forward).
        node_side_projection: apply the first layer's source/destination blocks of every edge
            MLP on nodes before gathering (module docstring); False gathers ``H`` itself.
        edge_features: a, width of the edge inputs ``A`` given to ``forward`` (0: none).
        aggregation: ``sum`` of the messages into a node, or their ``mean`` (module
            docstring).
    """

    #: Weights that read the leading columns of an input (x[:, :node_features]): a model file
    #: with fewer node features starts this network with the new columns at weight 0
    #: (trainer.init_from, trkx.training.fit.widened_weights).
    leading_input_weights: tuple[str, ...] = ("node_encoder.0.weight",)
    #: The per-iteration lists: a model file of more iterations starts this network from its
    #: first ``n_graph_iters`` (trainer.init_from, trkx.training.fit.first_iterations).
    iteration_lists: tuple[str, ...] = ("edge_nets", "node_nets")

    def inner_input_weights(self) -> dict[str, int]:
        """Weights whose input ends with columns that keep their place: the edge encoder reads
        ``[A, h_src, h_dst]``, so a model file with fewer edge inputs starts this network with
        the new edge-input columns, inserted before the ``2 hidden`` node columns, at weight 0
        (trainer.init_from, trkx.training.fit.widened_weights)."""
        return {"edge_encoder.0.weight": 2 * self.hidden} if self.edge_features else {}

    def __init__(self, node_features: int, hidden: int = 128, n_graph_iters: int = 8,
                 n_mlp_layers: int = 2, activation: str = "relu", layer_norm: bool = True,
                 checkpoint_iterations: bool = False, node_side_projection: bool = True,
                 edge_features: int = 0, aggregation: str = "sum") -> None:
        super().__init__()
        if aggregation not in AGGREGATIONS:
            raise ValueError(f"aggregation {aggregation!r} is not one of "
                             f"{', '.join(AGGREGATIONS)}")
        self.aggregation = aggregation
        if node_features < 1 or hidden < 1 or n_graph_iters < 0 or n_mlp_layers < 0:
            raise ValueError("node_features and hidden must be >= 1, n_graph_iters and "
                             "n_mlp_layers >= 0")
        if edge_features < 0:
            raise ValueError(f"edge_features must be >= 0, got {edge_features}")
        self.edge_features = edge_features
        self.node_features = node_features
        self.hidden = hidden
        self.n_graph_iters = n_graph_iters
        self.n_mlp_layers = n_mlp_layers
        self.activation = activation
        self.layer_norm = layer_norm
        self.checkpoint_iterations = checkpoint_iterations
        self.node_side_projection = node_side_projection
        inner = [hidden] * n_mlp_layers

        def mlp(in_features: int, out_features: int = hidden, output_activation: bool = True):
            return make_mlp(in_features, inner, out_features, activation, layer_norm,
                            output_activation)

        self.node_encoder = mlp(node_features)
        self.edge_encoder = mlp(edge_features + 2 * hidden)
        self.edge_nets = nn.ModuleList(mlp(3 * hidden) for _ in range(n_graph_iters))
        self.node_nets = nn.ModuleList(mlp(3 * hidden) for _ in range(n_graph_iters))
        self.classifier = mlp(3 * hidden, 1, output_activation=False)

    def _iteration(self, t: int, h: Tensor, e: Tensor, ops: GraphOps,
                   inverse_degrees: tuple[Tensor, Tensor] | None = None,
                   ) -> tuple[Tensor, Tensor]:
        if _row_blocked(ops, self.node_side_projection):
            return self._iteration_blocked(t, h, e, ops, inverse_degrees)
        messages = self._edge_mlp(self.edge_nets[t], e, h, ops)
        m_in, m_out = ops.aggregate(messages)
        if inverse_degrees is not None:
            m_in, m_out = m_in * inverse_degrees[0], m_out * inverse_degrees[1]
        h = h + self.node_nets[t](torch.cat([m_in.to(h.dtype), m_out.to(h.dtype), h], dim=1))
        return h, e + messages

    def forward(self, x: Tensor, ops: GraphOps, edge_attr: Tensor | None = None) -> Tensor:
        """Edge logits [E] for node features ``x`` [N, >= F] (its leading F columns) of the
        graph behind ``ops`` (and edge inputs ``edge_attr`` [E, a] when the model has
        ``edge_features = a > 0``)."""
        if x.dim() != 2 or x.shape[1] < self.node_features:
            raise ValueError(f"x must have shape [N, >= {self.node_features}], got "
                             f"{tuple(x.shape)}")
        x = x[:, :self.node_features]
        if x.shape[0] != ops.num_nodes:
            raise ValueError(f"x has {x.shape[0]} rows but the graph has {ops.num_nodes} nodes")
        if self.edge_features and (edge_attr is None or edge_attr.dim() != 2
                                   or edge_attr.shape[1] != self.edge_features):
            raise ValueError(f"this model needs edge inputs of shape [E, {self.edge_features}]"
                             f", got {None if edge_attr is None else tuple(edge_attr.shape)}")
        h = self.node_encoder(x)
        attr = edge_attr.to(h.dtype) if self.edge_features else None
        if _row_blocked(ops, self.node_side_projection):
            e = self._edge_mlp_blocked(self.edge_encoder, attr, h, ops)
        else:
            e = self._edge_mlp(self.edge_encoder, attr, h, ops)
        inverse = None
        if self.aggregation == "mean":
            degrees = ops.aggregate(h.new_ones(ops.num_edges, 1))
            inverse = tuple(1.0 / d.to(h.dtype).clamp_min(1.0) for d in degrees)
        for t in range(self.n_graph_iters):
            if self.checkpoint_iterations and torch.is_grad_enabled():
                h, e = checkpoint(self._iteration, t, h, e, ops, inverse, use_reentrant=False)
            else:
                h, e = self._iteration(t, h, e, ops, inverse)
        if _row_blocked(ops, self.node_side_projection):
            return self._edge_mlp_blocked(self.classifier, e, h, ops).squeeze(1)
        return self._edge_mlp(self.classifier, e, h, ops).squeeze(1)

    def flops_per_edge_and_node(self) -> tuple[int, int]:
        """FLOPs (2 per multiply-add) of the dense layers as computed, per edge and per node.

        Layers applied to edge rows count per edge; node-side layers (node encoder, node nets,
        and with ``node_side_projection`` the source/destination blocks of every edge MLP's
        first Linear) count per node. The sparse sums add ``2 h`` FLOPs per edge and iteration
        (counted by the caller).
        """
        def dense(module: nn.Module) -> int:
            return sum(2 * m.in_features * m.out_features for m in module.modules()
                       if isinstance(m, nn.Linear))
        per_edge = per_node = 0
        for net in (self.edge_encoder, *self.edge_nets, self.classifier):
            first = net[0]
            node_side = (2 * (2 * self.hidden) * first.out_features
                         if self.node_side_projection else 0)
            per_edge += dense(net) - node_side
            per_node += node_side
        per_node += dense(self.node_encoder) + sum(dense(net) for net in self.node_nets)
        return per_edge, per_node


    def _node_projection(self, net: nn.Sequential, e: Tensor | None,
                         ) -> tuple[nn.Linear, int, Tensor]:
        """``(first, o, P)``: the first Linear of ``net``, its width o and the node-side
        projection P = [W_S; W_D] [2o, H] of its source and destination blocks (after the
        edge block's columns when ``e`` is given), so that ``(S P h, D P h)`` replaces
        gathering ``[S h, D h]`` before the Linear."""
        first, hidden = net[0], self.hidden
        offset = 0 if e is None else e.shape[1]
        weight = first.weight
        projection = torch.cat([weight[:, offset:offset + hidden],
                                weight[:, offset + hidden:offset + 2 * hidden]], dim=0)
        return first, first.out_features, projection

    def _edge_mlp(self, net: nn.Sequential, e: Tensor | None, h: Tensor,
                  ops: GraphOps) -> Tensor:
        """``net([E, S H, D H])`` (``net([S H, D H])`` when ``e`` is None); ``E`` is the edge
        state or, for the encoder, the edge inputs ``A`` (any width)."""
        if not self.node_side_projection:
            h_src, h_dst = ops.gather(h)
            return net(torch.cat([h_src, h_dst] if e is None else [e, h_src, h_dst], dim=1))
        first, width, projection = self._node_projection(net, e)
        p_src, p_dst = ops.gather(F.linear(h, projection))  # [E, 2o]: (S P, D P)
        z = p_src[:, :width] + p_dst[:, width:]
        if e is None:
            z = z + first.bias
        else:
            z = z + F.linear(e, first.weight[:, :e.shape[1]], first.bias)
        return net[1:](z)

    # ---- inference path: row blocks, in place (same arithmetic, same bits) -----------------

    def _iteration_blocked(self, t: int, h: Tensor, e: Tensor, ops: GraphOps,
                           inverse_degrees: tuple[Tensor, Tensor] | None = None,
                           ) -> tuple[Tensor, Tensor]:
        """:meth:`_iteration` without autograd: the edge net runs in row blocks and the edge
        residual ``E + E'`` is added in place, block by block, while the block is in cache."""
        messages = self._edge_mlp_blocked(self.edge_nets[t], e, h, ops, residual=e)
        m_in, m_out = ops.aggregate(messages)
        if inverse_degrees is not None:
            m_in, m_out = m_in * inverse_degrees[0], m_out * inverse_degrees[1]
        z = torch.cat([m_in.to(h.dtype), m_out.to(h.dtype), h], dim=1)
        if h.shape[0] == 0:
            return h + self.node_nets[t](z), e
        fused = plan(self.node_nets[t], fused_precision())
        if fused is not None and fused.head is None:
            update = torch.empty(h.shape[0], fused.width, device="cpu")
            scratch = [Buffers(min(h.shape[0], INFERENCE_BLOCK_ROWS))
                       for _ in range(torch.get_num_threads())]

            def block(start: int, stop: int, worker: int) -> None:
                run_layers(fused.layers, z[start:stop], scratch[worker], out=update[start:stop])

            for_blocks(h.shape[0], INFERENCE_BLOCK_ROWS, block, len(scratch))
            return h + update, e
        update = None
        for start in range(0, h.shape[0], INFERENCE_BLOCK_ROWS):
            stop = start + INFERENCE_BLOCK_ROWS
            block = _mlp_in_place(self.node_nets[t], z[start:stop])
            if update is None:
                update = block.new_empty((h.shape[0], block.shape[1]))
            update[start:stop] = block
        return h + update, e

    def _edge_mlp_blocked(self, net: nn.Sequential, e: Tensor | None, h: Tensor,
                          ops: GraphOps, residual: Tensor | None = None) -> Tensor:
        """:meth:`_edge_mlp` (node-side projection) without autograd, ``INFERENCE_BLOCK_ROWS``
        edges at a time: the gathered projections, the edge block's Linear and every later
        layer of ``net`` stay in cache instead of making one [E, o] tensor per layer. Every
        element is computed by the same operations in the same order as :meth:`_edge_mlp`
        (a Linear's rows and a LayerNorm's rows do not depend on the other rows), so the
        result is bit-identical. With ``residual`` (the edge state ``E``), ``E += E'`` is done
        block by block in place."""
        src, dst = ops.endpoints()
        first, width, projection = self._node_projection(net, e)
        p = F.linear(h, projection)                                     # [N, 2o]
        fused = plan(net, fused_precision())
        if fused is not None and src.shape[0] and not (fused.bf16 and len(fused.layers) == 1):
            return _edge_mlp_fused(fused, first, width, p, src, dst, e, residual)
        p_src, p_dst = p[:, :width].contiguous(), p[:, width:].contiguous()
        rest = net[1:]
        out = None
        for start in range(0, src.shape[0], INFERENCE_BLOCK_ROWS):
            stop = start + INFERENCE_BLOCK_ROWS
            z = p_src.index_select(0, src[start:stop])
            z.add_(p_dst.index_select(0, dst[start:stop]))
            if e is None:
                z.add_(first.bias)
            else:
                z.add_(F.linear(e[start:stop], first.weight[:, :e.shape[1]], first.bias))
            z = _mlp_in_place(rest, z)
            if out is None:
                out = z.new_empty((src.shape[0], z.shape[1]))
            out[start:stop] = z
            if residual is not None:
                residual[start:stop].add_(z)
        if out is None:
            return self._edge_mlp(net, e, h, ops)
        return out


#: Rows per block of the inference path. A GEMM's rows are bit-identical to the unblocked
#: product only where every block starts at the same position within the BLAS kernel's row tile
#: (a block of 37 rows changed bits on the AVX2 build machine, multiples of 8 did not): a block
#: is a multiple of 2^6 * 3 * 5 * 7 = 6720 rows (1.7 MB at width 64, in a core's L2). The blocks
#: are shared out between the threads, one block per thread at a time
#: (trkx.runtime.block_threads); with every operation split over the threads instead, 26880-row
#: blocks were fastest (fewer barriers). Event 21001's 1.07M edges, 2-core EPYC, fp32, one
#: process alternating (min of 3): 6720-row blocks per thread 2.86 s, 26880 per thread 3.91 s,
#: 26880 split 3.77 s; bf16 2.05 / 2.33 / 2.32 s; the same bits in all.
INFERENCE_BLOCK_ROWS = 6720


def _row_blocked(ops: GraphOps, node_side_projection: bool) -> bool:
    """Whether the blocked inference path applies: no autograd, the node-side projection (the
    blocked edge MLP computes the first layer that way: the other form would change bits), a
    single-process GraphOps that exposes its edge endpoints, and the CPU (on a GPU the blocks
    would be many small kernels)."""
    return (not torch.is_grad_enabled() and node_side_projection and hasattr(ops, "endpoints")
            and row_blocked(ops.endpoints()[0]))


def _edge_mlp_fused(fused: MLPPlan, first: nn.Linear, width: int, projected: Tensor,
                    src: Tensor, dst: Tensor, e: Tensor | None,
                    residual: Tensor | None) -> Tensor:
    """``InteractionGNN._edge_mlp_blocked`` with each layer a product and one compiled pass
    (trkx.runtime.fused_mlp): the first layer's pass gathers the node-side projections
    ``projected`` [N, 2o] of each edge's two ends, the last adds the edge residual in place (or
    folds a final Linear to one output). The plain rows to float32 rounding."""
    from trkx.runtime.fused_kernels import gather_norm_relu, gather_norm_relu_bf16
    from trkx.runtime.fused_mlp import bits

    head_layer = fused.layers[0]
    rows = src.shape[0]
    dtype = torch.bfloat16 if fused.bf16 else torch.float32
    edge_weight_t = None if e is None else first.weight[:, :e.shape[1]].t().to(dtype)
    projected = projected.float().contiguous().numpy()
    src_np, dst_np = src.numpy(), dst.numpy()
    out = projected_out = None
    if fused.head is not None:
        projected_out = torch.empty(rows, device="cpu")
    else:
        out = torch.empty(rows, fused.width, device="cpu")
    scratch = [Buffers(min(rows, INFERENCE_BLOCK_ROWS)) for _ in range(torch.get_num_threads())]

    def block(start: int, stop: int, worker: int) -> None:
        buffers = scratch[worker]
        z = buffers.get(width, stop - start, dtype=dtype)
        if edge_weight_t is not None:
            torch.mm(e[start:stop].to(dtype), edge_weight_t, out=z)
        if fused.bf16:
            gather_norm_relu_bf16(bits(z), projected, src_np[start:stop], dst_np[start:stop],
                                  edge_weight_t is not None, head_layer.bias, head_layer.gamma,
                                  head_layer.beta, head_layer.eps, head_layer.relu, bits(z))
        else:
            gather_norm_relu(z.numpy(), projected, src_np[start:stop], dst_np[start:stop],
                             edge_weight_t is not None, head_layer.bias, head_layer.gamma,
                             head_layer.beta, head_layer.eps, head_layer.relu)
        if len(fused.layers) == 1:                          # the first layer is the last
            if fused.head is not None:
                weight, offset = fused.head
                torch.mv(z, torch.from_numpy(weight), out=projected_out[start:stop])
                projected_out[start:stop].add_(offset)
                return
            out[start:stop] = z
            if residual is not None:
                residual[start:stop].add_(z)
            return
        run_layers(fused.layers[1:], z, buffers,
                   out=None if out is None else out[start:stop],
                   residual=None if residual is None else residual[start:stop],
                   head=fused.head,
                   head_out=None if projected_out is None else projected_out[start:stop])

    for_blocks(rows, INFERENCE_BLOCK_ROWS, block, len(scratch))
    return projected_out.unsqueeze(1) if out is None else out


def _mlp_in_place(net: nn.Sequential, z: Tensor) -> Tensor:
    """``net(z)`` without autograd, ReLUs applied in place (bit-identical to ``net(z)``)."""
    for module in net:
        z = z.relu_() if isinstance(module, nn.ReLU) else module(z)
    return z
