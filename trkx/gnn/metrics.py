"""The GNN's edge metrics (docs/design.md, "Figures").

For edges ``k`` with truth label ``y_k`` (a truth-graph edge), signal flag ``sig_k`` (a truth
edge of a signal particle), score ``p_k`` and loss weight ``w_k`` (:mod:`trkx.edges.loss`), at
cut ``c``:

    efficiency     = #{k : sig_k, p_k >= c} / #{k : sig_k}        (trkx.edges.figures)
    purity         = #{k : y_k, p_k >= c} / #{k : p_k >= c}
    AUC            = P_w(p_pos > p_neg) + 1/2 P_w(p_pos = p_neg),  pairs drawn with weights w
                     (positives: y_k; negatives: not y_k; the weighted Mann-Whitney statistic)
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from trkx.edges.figures import edge_efficiency, edge_purity, kept_edges


def weighted_auc(scores: Tensor, y: Tensor, weights: Tensor) -> float:
    """Weighted ROC AUC (ties count one half); NaN when either class has no weight."""
    unique, inverse = torch.unique(scores.double(), return_inverse=True)
    w = weights.double()
    pos = torch.zeros(unique.numel(), dtype=torch.float64).index_add_(0, inverse, w * y)
    neg = torch.zeros(unique.numel(), dtype=torch.float64).index_add_(0, inverse, w * ~y)
    total_pos, total_neg = pos.sum(), neg.sum()
    if total_pos <= 0 or total_neg <= 0:
        return float("nan")
    negatives_below = torch.cumsum(neg, 0) - neg
    return float((pos * (negatives_below + 0.5 * neg)).sum() / (total_pos * total_neg))


@dataclass(frozen=True)
class EdgeMetrics:
    """Signal edge efficiency, edge purity and weighted AUC at one cut."""

    efficiency: float
    purity: float
    auc: float
    cut: float

    def as_dict(self, prefix: str = "") -> dict[str, float]:
        return {f"{prefix}efficiency": self.efficiency, f"{prefix}purity": self.purity,
                f"{prefix}auc": self.auc}


def edge_metrics(scores: Tensor, y: Tensor, signal: Tensor, weights: Tensor,
                 cut: float) -> EdgeMetrics:
    """Metrics of sigmoid ``scores`` [E] against truth ``y`` and ``signal`` (bool [E])."""
    y, signal = y.bool(), signal.bool()
    kept = kept_edges(scores, cut)
    return EdgeMetrics(edge_efficiency(kept, signal), edge_purity(kept, y),
                       weighted_auc(scores, y, weights), cut)
