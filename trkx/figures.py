"""Edge figures, defined once for every stage report (docs/design.md, "Figures, defined once").

For candidate edges k with score p_k, truth-graph label y_k (``y``: the edge joins consecutive
hits of one particle) and signal flag sig_k, at cut c:

    kept        K = {k : p_k >= c}                  every score cut in trkx is ``>=``
    efficiency    = |K & sig| / n_signal            n_signal: the signal edges counted against
    purity        = |K & y| / |K|                   truth-graph edges among kept edges
    purity_pid    = |K & y_pid| / |K|               any edge joining two hits of one particle

A rate over an empty set is NaN (undefined), never 0.
"""

from __future__ import annotations

import torch
from torch import Tensor


def kept_edges(scores: Tensor, cut: float) -> Tensor:
    """``scores >= cut`` (bool [E]): the edges a stage keeps at ``cut``."""
    return scores >= cut


def share(part: int | Tensor, whole: int | Tensor) -> float:
    """``part / whole`` as a float; NaN when ``whole`` is 0."""
    whole = int(whole)
    return int(part) / whole if whole else float("nan")


def edge_efficiency(kept: Tensor, signal: Tensor, n_signal: int | None = None) -> float:
    """Signal edges kept / ``n_signal`` (default: the signal edges among these edges)."""
    signal = signal.bool().to(kept.device)
    total = int(signal.sum()) if n_signal is None else n_signal
    return share((kept & signal).sum(), total)


def edge_purity(kept: Tensor, y: Tensor) -> float:
    """Truth-graph edges (``y``) among kept edges: ``|K & y| / |K|``."""
    return share((kept & y.bool().to(kept.device)).sum(), kept.sum())


def all_kept(n_edges: int, device: torch.device | str = "cpu") -> Tensor:
    """The kept mask of a graph whose every edge counts (a stage's output records)."""
    return torch.ones(n_edges, dtype=torch.bool, device=device)
