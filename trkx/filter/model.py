"""The filter network: an MLP from edge features to one logit per edge.

    h_0 = f_e,   h_{l+1} = ReLU(LayerNorm(W_l h_l + b_l)),   logit_e = w^T h_L + b,
    score_e = sigmoid(logit_e).
"""

from __future__ import annotations

import torch
from torch import nn

from trkx.filter.features import edge_feature_count


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
        return self.net(features).squeeze(-1)
