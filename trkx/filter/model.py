"""The filter network: an MLP from edge features to one logit per edge.

    h_0 = f_e,   h_{l+1} = ReLU(LayerNorm(W_l h_l + b_l)),   logit_e = w^T h_L + b,
    score_e = sigmoid(logit_e).
"""

from __future__ import annotations

import torch
from torch import nn

from trkx.filter.features import edge_feature_count
from trkx.runtime.block_threads import for_blocks
from trkx.runtime.device import row_blocked
from trkx.runtime.fused_mlp import Buffers, MLPPlan, fused_precision, plan, run_layers


class FilterMLP(nn.Module):
    """Edge features ``[E, in_features]`` -> logits ``[E]``.

    ``hit_features`` (leading columns of the hit features used), ``cell_agreement`` (add the
    cluster-direction agreement) and ``trajectory`` (add z0, phislope, rphislope) fix the
    edge-feature layout of trkx.filter.features.
    """

    def __init__(self, hit_features: int, cell_agreement: bool = False, hidden: int = 128,
                 layers: int = 3, trajectory: bool = False) -> None:
        super().__init__()
        if hit_features < 1 or hidden < 1 or layers < 1:
            raise ValueError("hit_features, hidden and layers must be >= 1")
        in_features = edge_feature_count(hit_features, cell_agreement, trajectory)
        self.hit_features, self.cell_agreement = hit_features, cell_agreement
        self.trajectory = trajectory
        blocks: list[nn.Module] = []
        width = in_features
        for _ in range(layers):
            blocks += [nn.Linear(width, hidden), nn.LayerNorm(hidden), nn.ReLU()]
            width = hidden
        blocks.append(nn.Linear(width, 1))
        self.net = nn.Sequential(*blocks)
        self.in_features = in_features

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        if features.shape[-1] != self.in_features:
            raise ValueError(f"the filter expects {self.in_features} edge features, got "
                             f"{features.shape[-1]} (hit features or cell features differ "
                             "from training)")
        if torch.is_grad_enabled() or not row_blocked(features):
            return self.net(features).squeeze(-1)       # training, or a GPU: one forward
        return self._forward_blocked(features)

    def _forward_blocked(self, features: torch.Tensor) -> torch.Tensor:
        """``net(features)`` without autograd, ``INFERENCE_BLOCK_ROWS`` rows at a time with
        the ReLUs in place: each block's hidden layers stay in cache instead of making one
        [E, hidden] tensor per layer. A Linear's and a LayerNorm's rows do not depend on the
        other rows, so the logits are bit-identical to ``net(features)``."""
        rows = features.shape[0]
        if rows == 0:
            return self.net(features).squeeze(-1)
        fused = plan(self.net, fused_precision()) if features.dtype == torch.float32 else None
        if fused is not None and fused.head is not None:
            return self._forward_fused(fused, features)
        out = None
        for start in range(0, rows, INFERENCE_BLOCK_ROWS):
            z = features[start:start + INFERENCE_BLOCK_ROWS]
            for module in self.net:
                z = z.relu_() if isinstance(module, nn.ReLU) else module(z)
            if out is None:
                out = z.new_empty(rows)
            out[start:start + INFERENCE_BLOCK_ROWS] = z.squeeze(-1)
        return out


    def _forward_fused(self, fused: MLPPlan, features: torch.Tensor) -> torch.Tensor:
        """:meth:`_forward_blocked` with each layer a product and one compiled pass, the last
        Linear folded into the last pass (trkx.runtime.fused_mlp): the plain logits to float32
        rounding."""
        rows = features.shape[0]
        out = features.new_empty(rows)
        scratch = [Buffers(min(rows, INFERENCE_BLOCK_ROWS))
                   for _ in range(torch.get_num_threads())]

        def block(start: int, stop: int, worker: int) -> None:
            run_layers(fused.layers, features[start:stop], scratch[worker], head=fused.head,
                       head_out=out[start:stop])

        for_blocks(rows, INFERENCE_BLOCK_ROWS, block, len(scratch))
        return out


#: Rows per block of the inference path: blocks must be a multiple of the BLAS row tile (6720 =
#: 2^6 * 3 * 5 * 7 rows: trkx.gnn.model.INFERENCE_BLOCK_ROWS has the figures), here one block
#: per thread at a time (trkx.runtime.block_threads). With every product split over the threads
#: instead, 26880 rows were faster than 6720 (1.10-1.12 s against 1.21-1.23 s on event 21001).
INFERENCE_BLOCK_ROWS = 6720
