"""The weighted edge loss that the filter and the GNN both minimise.

For candidate edges ``k`` with target ``t_k`` (1 for a true edge), signal flag ``sig_k`` and
logit ``l_k``:

    weight w_k = w_signal * min(pT_k / 1 GeV, c)^a * (w_sec if r_k > 1 mm)
                          * (w_short if n_k <= n_short)                      if sig_k,
                 w_true if t_k, else w_fake
    BCE_k      = -[t_k log sigmoid(l_k) + (1 - t_k) log(1 - sigmoid(l_k))]
    loss       = sum_k w_k BCE_k / sum_k w_k        (0 for a graph without edges)

The weights put the efficiency that counts (signal edges) ahead of the purity of the rest;
dividing by ``sum_k w_k`` keeps the loss scale independent of the event size.

The pT factor (power ``a`` >= 0, cap ``c`` >= 1; ``a = 0`` turns it off) undoes the steep
spectrum: signal edges are ~1/pT-distributed in their turning rate dphi/dr while fakes are flat,
so without it the stiff tracks a physicist wants most are the rarest signal in training and an
edge classifier learns that a straight edge is usually fake (docs/levers.md). With ``a = 1`` the
weighted signal density per unit dphi/dr is flat up to ``pT = c``.

The secondary factor ``w_sec`` (1: off) weighs the signal edges of secondary particles, those
whose production radius ``r_k`` (of the edge's first hit's particle) exceeds 1 mm
(trkx.data.truth.PROMPT_RADIUS): they are 7% of the signal, so an unweighted loss learns
the prompt topology (an edge that points back to the beam line) and loses them.

The short factor ``w_short`` (1: off) weighs the signal edges of particles of at most
``n_short`` hits (``n_k``, of the edge's first hit's particle): those that end in the material
after 3-4 hits are 2.5% of the prompt signal of a pile-up-200 event, and a track is found
only when every one of their 2-3 edges survives the GNN's cut (docs/levers.md).

The focal factor (Lin et al., "Focal loss for dense object detection", 2017; ``gamma = 0``:
off) multiplies each term by ``|t_k - sigmoid(l_k)|^gamma``, ``(1 - p_t)^gamma`` for a hard
target and the distance to a soft one (a teacher's mixed target): the edges the network
already classifies well weigh little and the hard ones (a fake scored high, a signal edge
scored low) weigh most, where the track builder's cut decides (docs/levers.md: the edges of
two particles above the cut are what keeps the anchors' count from 0.99).
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.nn import functional as F

from trkx.data.truth import PROMPT_RADIUS


def edge_weights(y: Tensor, signal: Tensor, signal_weight: float, true_weight: float,
                 fake_weight: float, signal_pt: Tensor | None = None, pt_power: float = 0.0,
                 pt_cap: float = 10.0, signal_radius: Tensor | None = None,
                 secondary_weight: float = 1.0) -> Tensor:
    """Per-edge loss weight: ``signal_weight`` on signal edges (times ``min(pT, pt_cap)^pt_power``
    when ``pt_power > 0``; ``signal_pt`` [E] in GeV; times ``secondary_weight`` where
    ``signal_radius`` [E], the production radius in mm, exceeds 1 mm),
    ``true_weight`` on other true edges (``y``), ``fake_weight`` on the others (float32 [E])."""
    weights = torch.full(y.shape, fake_weight, dtype=torch.float32, device=y.device)
    weights[y.bool()] = true_weight
    signal = signal.bool()
    weights[signal] = signal_weight
    if pt_power > 0:
        if signal_pt is None:
            raise ValueError("a pT-weighted signal loss needs the signal edges' pT")
        pt = signal_pt[signal].float().clamp(max=pt_cap)
        weights[signal] = signal_weight * pt.pow(pt_power)
    if secondary_weight != 1.0:
        if signal_radius is None:
            raise ValueError("a secondary weight needs the edges' production radius")
        secondary = signal & (signal_radius.float() > PROMPT_RADIUS)
        weights[secondary] = weights[secondary] * secondary_weight
    return weights


def weighted_bce(logits: Tensor, y: Tensor, weights: Tensor, focal_gamma: float = 0.0,
                 ) -> Tensor:
    """``sum_k w_k BCE(logit_k, y_k) / sum_k w_k`` (zero for a graph without edges); with
    ``focal_gamma`` > 0 each term is multiplied by ``|y_k - sigmoid(logit_k)|^gamma`` (the
    module docstring's focal factor)."""
    losses = F.binary_cross_entropy_with_logits(logits, y.to(logits.dtype), reduction="none")
    if focal_gamma < 0:
        raise ValueError(f"focal_gamma must be >= 0, got {focal_gamma}")
    if focal_gamma > 0:
        losses = losses * (y.to(logits.dtype) - torch.sigmoid(logits)).abs().pow(focal_gamma)
    return (weights.to(losses.dtype) * losses).sum() / weights.sum().clamp_min(1e-12)
