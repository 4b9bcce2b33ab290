"""Working points chosen on validation events, never guessed.

For a stage that keeps the edges with ``score >= cut``, the cut that keeps at least a fraction
``target`` of the signal edges it receives is

    cut(target) = max { c : #{k signal, s_k >= c} >= target * #{k signal} },

i.e. the ``floor((1 - target) n)``-th smallest signal score (ties keep more, never fewer).
The same rule serves the filter (target ~0.99 of the embedding graph's signal edges) and the
reporting cut of the GNN.
"""

from __future__ import annotations

import math

import torch


def cut_for_efficiency(signal_scores: torch.Tensor, target: float) -> float:
    """The largest cut keeping ``>= target`` of the signal edges (``scores >= cut``).

    ``signal_scores`` are the scores of the signal edges only (any shape). With no signal
    edges the cut is 0 (keep everything): a working point cannot be chosen from no evidence.
    """
    if not 0.0 < target <= 1.0:
        raise ValueError(f"target efficiency must lie in (0, 1], got {target}")
    scores = signal_scores.detach().flatten().double().cpu()
    n = scores.numel()
    if n == 0:
        return 0.0
    ordered = torch.sort(scores).values
    allowed_losses = math.floor((1.0 - target) * n + 1e-9)  # signal edges we may drop
    return float(ordered[min(allowed_losses, n - 1)])
