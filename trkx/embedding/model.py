"""The embedding network: an MLP from hit features to a point on the unit sphere.

    h_0 = x,   h_{l+1} = tanh(LayerNorm(W_l h_l + b_l))   (l < L),
    e = W_L h_L + b_L,   e <- e / |e|                      (e in S^{d-1}, d = embedding_dim).

The input is the leading ``in_features`` columns of the hit features. On the unit sphere distances lie in [0, 2], so one radius means the same thing for every model.
"""

from __future__ import annotations

import torch
from torch import nn


class EmbeddingMLP(nn.Module):
    """Hit features ``[N, in_features]`` -> normalised embeddings ``[N, embedding_dim]``."""

    def __init__(self, in_features: int, hidden: int = 128, layers: int = 3,
                 embedding_dim: int = 12, layer_norm: bool = True) -> None:
        super().__init__()
        if in_features < 1 or hidden < 1 or layers < 1 or embedding_dim < 1:
            raise ValueError("in_features, hidden, layers and embedding_dim must be >= 1")
        blocks: list[nn.Module] = []
        width = in_features
        for _ in range(layers):
            blocks.append(nn.Linear(width, hidden))
            if layer_norm:
                blocks.append(nn.LayerNorm(hidden))
            blocks.append(nn.Tanh())
            width = hidden
        blocks.append(nn.Linear(width, embedding_dim))
        self.net = nn.Sequential(*blocks)
        self.in_features = in_features

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Embed the leading ``in_features`` columns of ``x``.

        Hit features put (r, phi, z) first and cell features after (trkx.data.features), so a
        position-only model (in_features = 3) also runs on records that carry cell features
        for the later stages.
        """
        if x.shape[-1] < self.in_features:
            raise ValueError(f"the embedding model expects {self.in_features} input features, "
                             f"got {x.shape[-1]} (check use_cells / in_features)")
        return nn.functional.normalize(self.net(x[..., :self.in_features]), dim=-1)
