"""Working points chosen on validation events, never guessed.

For a stage that keeps the edges with ``score >= cut``, the cut that keeps at least a fraction
``target`` of the signal edges it receives is

    cut(target) = max { c : #{k signal, s_k >= c} >= target * #{k signal} },

i.e. the ``floor((1 - target) n)``-th smallest signal score (ties keep more, never fewer).
The same rule serves the filter (target ~0.99 of the embedding graph's signal edges) and the
reporting cut of the GNN.

A bound on the edges a stage keeps per hit, ``max_edges_per_hit`` = m over N hits, gives the
smallest cut that keeps at most ``floor(m N)`` edges:

    cut_m = min { c : #{k, s_k >= c} <= floor(m N) }   (0 when all edges fit),

the value just above the ``floor(m N)``-th largest score (ties drop, never keep more).
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


def cut_for_edges_per_hit(scores: torch.Tensor, n_hits: int, max_edges_per_hit: float) -> float:
    """The smallest cut keeping at most ``max_edges_per_hit * n_hits`` of the edges scored
    ``scores`` (``scores >= cut``; 0 when they all fit)."""
    if max_edges_per_hit <= 0 or n_hits < 0:
        raise ValueError(f"max_edges_per_hit must be > 0 and n_hits >= 0, got "
                         f"{max_edges_per_hit} and {n_hits}")
    flat = scores.detach().flatten().cpu()
    allowed = math.floor(max_edges_per_hit * n_hits + 1e-9)
    if flat.numel() <= allowed:
        return 0.0
    above = torch.topk(flat, allowed + 1).values[allowed]   # the (allowed + 1)-th largest
    # the next value of the scores' own dtype: a float32 score equal to it must drop
    return float(torch.nextafter(above, torch.tensor(math.inf, dtype=above.dtype)))
