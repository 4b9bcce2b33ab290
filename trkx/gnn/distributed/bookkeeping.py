"""Loss and gradient bookkeeping: the distributed model is the single-process function.

The single-process loss over all ``E`` edges is ``L = (1 / Z) sum_k l_k`` with a normaliser
``Z`` (``E`` for a mean, ``sum_k w_k`` for a weighted mean). Rank ``r`` owns the edge set
``E_r``; with replication ``c`` each edge is owned by ``c`` replicas computing identical values.
Each rank minimises

    L_r = (1 / (c Z)) sum_{k in E_r} l_k          so that      sum_r L_r = L,

and since every operator's backward is its exact adjoint (the transposed communication),
``sum_r dL_r/dtheta = dL/dtheta``: parameter gradients are **summed** over all ``P`` ranks
(:func:`all_reduce_gradients`). Under DDP, which *averages* gradients, multiply ``L_r`` by ``P``
(``ddp_averaging=True``). ``Z`` itself is global: :func:`global_sum` of the local parts / c.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
import torch.distributed as dist
from torch import Tensor


def global_sum(value: Tensor | float, replication: int = 1,
               group: dist.ProcessGroup | None = None) -> Tensor:
    """``sum_r value_r / c`` (no gradient): e.g. the global edge count from local counts."""
    t = torch.as_tensor(value, dtype=torch.float64).detach().clone().reshape(())
    if dist.is_initialized():
        dist.all_reduce(t, op=dist.ReduceOp.SUM, group=group)
    return t / replication


def rank_loss(edge_losses: Tensor, normaliser: Tensor | float, replication: int = 1,
              world_size: int = 1, ddp_averaging: bool = False) -> Tensor:
    """``L_r = sum_{k in E_r} l_k / (c Z)`` (times ``P`` when DDP averages the gradients)."""
    scale = (world_size if ddp_averaging else 1) / (replication * float(normaliser))
    return edge_losses.sum() * scale


def all_reduce_gradients(parameters: Iterable[torch.nn.Parameter],
                         group: dist.ProcessGroup | None = None) -> None:
    """Sum every parameter gradient over the ranks of ``group`` (in one flat buffer)."""
    grads = [p.grad for p in parameters if p.grad is not None]
    if not grads or not dist.is_initialized():
        return
    flat = torch.cat([g.reshape(-1) for g in grads])
    dist.all_reduce(flat, op=dist.ReduceOp.SUM, group=group)
    offset = 0
    for g in grads:
        g.copy_(flat[offset:offset + g.numel()].view_as(g))
        offset += g.numel()


def reported_loss(local_loss: Tensor, group: dist.ProcessGroup | None = None) -> float:
    """The global loss value ``sum_r L_r`` (for logging; no gradient)."""
    t = local_loss.detach().clone().double()
    if dist.is_initialized():
        dist.all_reduce(t, op=dist.ReduceOp.SUM, group=group)
    return float(t)
