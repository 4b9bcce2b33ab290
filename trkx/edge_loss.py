"""The weighted edge loss that the filter and the GNN both minimise.

For candidate edges ``k`` with target ``t_k`` (1 for a true edge), signal flag ``sig_k`` and
logit ``l_k``:

    weight w_k = w_signal if sig_k, else w_true if t_k, else w_fake
    BCE_k      = -[t_k log sigmoid(l_k) + (1 - t_k) log(1 - sigmoid(l_k))]
    loss       = sum_k w_k BCE_k / sum_k w_k        (0 for a graph without edges)

The weights put the efficiency that counts (signal edges) ahead of the purity of the rest;
dividing by ``sum_k w_k`` keeps the loss scale independent of the event size.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.nn import functional as F


def edge_weights(y: Tensor, signal: Tensor, signal_weight: float, true_weight: float,
                 fake_weight: float) -> Tensor:
    """Per-edge loss weight: ``signal_weight`` on signal edges, ``true_weight`` on other true
    edges (``y``), ``fake_weight`` on the others (float32 [E])."""
    weights = torch.full(y.shape, fake_weight, dtype=torch.float32, device=y.device)
    weights[y.bool()] = true_weight
    weights[signal.bool()] = signal_weight
    return weights


def weighted_bce(logits: Tensor, y: Tensor, weights: Tensor) -> Tensor:
    """``sum_k w_k BCE(logit_k, y_k) / sum_k w_k`` (zero for a graph without edges)."""
    losses = F.binary_cross_entropy_with_logits(logits, y.to(logits.dtype), reduction="none")
    return (weights.to(losses.dtype) * losses).sum() / weights.sum().clamp_min(1e-12)
