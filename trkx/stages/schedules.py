"""Learning-rate schedules of the learned stages, in optimiser steps (never wall time).

Linear warm-up then cosine decay to ``floor`` times the base rate:

    f(t) = (t + 1) / w                                          for t < w,
    f(t) = floor + (1 - floor) (1 + cos(pi min(1, (t - w) / (T - w)))) / 2   otherwise,

with ``w`` warm-up steps and ``T`` the schedule's horizon: the step budget (Lightning's
``estimated_stepping_batches``) by default, or a fixed ``lr_horizon_steps`` of the stage's
module, so that a long run resumed under a larger budget keeps the same learning-rate curve
(a horizon that follows the budget would jump back up when the budget grows).
"""

from __future__ import annotations

import math

import torch


def warmup_cosine(step: int, warmup: int, total: int, floor: float = 0.05) -> float:
    """The factor f(step) of the base learning rate."""
    if warmup > 0 and step < warmup:
        return (step + 1) / warmup
    span = max(total - warmup, 1)
    progress = min(1.0, max(0.0, (step - warmup) / span))
    return floor + (1.0 - floor) * 0.5 * (1.0 + math.cos(math.pi * progress))


def adamw_warmup_cosine(parameters, learning_rate: float, weight_decay: float, warmup: int,
                        total_steps: int, floor: float = 0.05) -> dict:
    """AdamW with the warm-up + cosine schedule stepped every optimiser step (Lightning dict)."""
    optimiser = torch.optim.AdamW(parameters, lr=learning_rate, weight_decay=weight_decay)
    total = max(int(total_steps), 1)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimiser, lambda step: warmup_cosine(step, warmup, total, floor))
    return {"optimizer": optimiser,
            "lr_scheduler": {"scheduler": schedule, "interval": "step", "frequency": 1}}


def total_steps(module, horizon: int | None = None) -> int:
    """``horizon`` when given, else the optimiser steps of the current fit (max_steps, else
    epochs x batches)."""
    if horizon is not None:
        return int(horizon)
    trainer = getattr(module, "_trainer", None)
    if trainer is None:
        return 1
    steps = trainer.estimated_stepping_batches
    return int(steps) if math.isfinite(steps) else 1


def check_horizon(horizon: int | None) -> None:
    """A fixed schedule horizon must be a positive step count (None: the step budget)."""
    if horizon is not None and (isinstance(horizon, bool) or not isinstance(horizon, int)
                                or horizon < 1):
        raise ValueError(f"lr_horizon_steps must be a positive step count or null, got "
                         f"{horizon!r}")
