"""Edge figures, defined once for every stage report (docs/design.md, "Figures, defined once").

For candidate edges k with score p_k, truth-graph label y_k (``y``: the edge joins consecutive
hits of one particle) and signal flag sig_k, at cut c:

    kept        K = {k : p_k >= c}                  every score cut in trkx is ``>=``
    efficiency    = |K & sig| / n_signal            n_signal: the signal edges counted against
    purity        = |K & y| / |K|                   truth-graph edges among kept edges
    purity_pid    = |K & y_pid| / |K|               any edge joining two hits of one particle

A rate over an empty set is NaN (undefined), never 0.

Split by origin, the efficiency counts the signal edges of prompt and of secondary particles
apart (:func:`secondary_edges`: the production radius of the particle of the edge's first hit
exceeds trkx.data.truth.PROMPT_RADIUS), for records that carry ``production_radius``.
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


def secondary_edges(record, edges: Tensor | None = None) -> Tensor | None:
    """Per edge of ``edges`` (default: the record's ``edge_index``), whether its first hit's
    particle is a secondary; None when the record has no ``production_radius``."""
    from trkx.data.truth import PROMPT_RADIUS

    radius = getattr(record, "production_radius", None)
    if radius is None:
        return None
    edges = record.edge_index if edges is None else edges
    return radius.to(edges.device)[edges[0]] > PROMPT_RADIUS


def origin_counts(kept: Tensor, signal: Tensor, secondary: Tensor) -> dict[str, int]:
    """Kept and total signal edges of the prompt and of the secondary particles (for pooling
    over events before the ratio)."""
    signal = signal.bool().to(kept.device)
    secondary = secondary.to(kept.device)
    out = {}
    for name, population in (("prompt", signal & ~secondary), ("secondary", signal & secondary)):
        out[f"kept_{name}"] = int((kept & population).sum())
        out[f"total_{name}"] = int(population.sum())
    return out


def origin_efficiencies(counts: list[dict[str, int]]) -> dict[str, float]:
    """``efficiency_prompt`` and ``efficiency_secondary`` of pooled :func:`origin_counts`."""
    return {f"efficiency_{name}": share(sum(c[f"kept_{name}"] for c in counts),
                                        sum(c[f"total_{name}"] for c in counts))
            for name in ("prompt", "secondary")}


def all_kept(n_edges: int, device: torch.device | str = "cpu") -> Tensor:
    """The kept mask of a graph whose every edge counts (a stage's output records)."""
    return torch.ones(n_edges, dtype=torch.bool, device=device)
