"""Training pairs and the hinge loss of the metric-learning embedding.

Pairs (i, j) come from three sources (the Exa.TrkX regime):

- truth-graph positives: the record's ``track_edges``;
- random pairs: ``random_pairs_per_hit * N`` uniformly drawn (i, j);
- hard negatives: every queried hit's ``k`` nearest neighbours within ``margin`` in the
  *current* embedding (found with build_edges' neighbour search on detached embeddings).

A pair is positive when both hits belong to the same particle (noise never). With squared
distance ``d2 = |e_i - e_j|^2`` and margin ``m``, the loss is

    L = sum_{pos} w_ij d2_ij / sum_{pos} w_ij  +  sum_{neg} w_ij relu(m - |e_i - e_j|)^2 / #neg,

where ``w_ij = signal_weight`` for pairs of signal hits of one particle (times
``secondary_weight`` when that particle was produced beyond ``PROMPT_RADIUS`` = 1 mm from the
beam axis: the secondaries, 7% of the signal, whose pairs an unweighted loss leaves far
apart) and 1 otherwise: positives are pulled together, negatives pushed out of the
margin ball.
"""

from __future__ import annotations

import numpy as np
import torch

from trkx.data.truth import PROMPT_RADIUS
from trkx.embedding.graph import neighbour_table


def hard_negative_pairs(embedding: torch.Tensor, margin: float, k: int,
                        queries: int | None, generator: np.random.Generator) -> torch.Tensor:
    """[2, P] pairs (query, neighbour) of the current embedding within ``margin``.

    ``queries`` limits the number of query hits (a random subset) to bound the cost.
    """
    n = embedding.shape[0]
    points = embedding.detach()
    rows = np.arange(n)
    if queries is not None and queries < n:
        rows = np.sort(generator.choice(n, queries, replace=False))
    table = neighbour_table(points, margin, k, "auto")[rows]
    src = np.repeat(rows, table.shape[1])
    dst = table.reshape(-1)
    keep = dst >= 0
    return torch.from_numpy(np.stack([src[keep], dst[keep]]).astype(np.int64))


def random_pairs(n: int, per_hit: float, generator: np.random.Generator) -> torch.Tensor:
    count = round(per_hit * n)
    pairs = generator.integers(0, n, size=(2, count))
    pairs = pairs[:, pairs[0] != pairs[1]]
    return torch.from_numpy(pairs.astype(np.int64))


def pair_labels(pairs: torch.Tensor, particle_id: torch.Tensor, signal_hit: torch.Tensor,
                signal_weight: float, production_radius: torch.Tensor | None = None,
                secondary_weight: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """(positive mask, weight) per pair; ``production_radius`` [N] (mm, per hit) is needed
    when ``secondary_weight`` != 1 (module docstring)."""
    pid_i, pid_j = particle_id[pairs[0]], particle_id[pairs[1]]
    positive = (pid_i == pid_j) & (pid_i != 0)
    signal = positive & signal_hit[pairs[0]] & signal_hit[pairs[1]]
    weight = torch.where(signal, torch.as_tensor(float(signal_weight)), torch.as_tensor(1.0))
    if secondary_weight != 1.0:
        if production_radius is None:
            raise ValueError("module.secondary_weight needs the hits' truth production_radius "
                             "in each training record (records with truth)")
        secondary = signal & (production_radius[pairs[0]].float() > PROMPT_RADIUS)
        weight = torch.where(secondary, weight * float(secondary_weight), weight)
    return positive, weight


def hinge_loss(embedding: torch.Tensor, pairs: torch.Tensor, positive: torch.Tensor,
               weight: torch.Tensor, margin: float) -> torch.Tensor:
    """The loss of the module docstring (mean over each class, classes summed)."""
    diff = embedding[pairs[0]] - embedding[pairs[1]]
    d2 = (diff * diff).sum(-1)
    loss = embedding.new_zeros(())
    if positive.any():
        w = weight[positive].to(embedding.dtype)
        loss = loss + (w * d2[positive]).sum() / w.sum()
    negative = ~positive
    if negative.any():
        w = weight[negative].to(embedding.dtype)
        push = torch.relu(margin - torch.sqrt(d2[negative] + 1e-12)) ** 2
        loss = loss + (w * push).sum() / negative.sum()
    return loss
