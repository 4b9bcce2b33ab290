"""Counted collectives: every byte and message a rank moves, per operation.

Each wrapper calls one ``torch.distributed`` collective and records, for the calling rank, the
bytes and point-to-point messages it sends and receives under a label such as
``"gather.forward"``. Counts follow the logical data movement of the collective, from the sizes
of the tensors actually handed to it (``numel * element_size``):

- ``broadcast`` over ``g`` ranks: the root sends the tensor to each of the ``g - 1`` others;
- ``reduce`` (sum to a root): each non-root sends its tensor; the root receives ``g - 1``;
- ``all_reduce`` (ring model): each rank sends and receives ``2 (g - 1) / g`` of the tensor in
  ``2 (g - 1)`` messages (floored to whole bytes);
- ``all_to_all_single``: the split sizes; messages are the non-empty splits to other ranks.

A group of one rank moves nothing and issues no call.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import torch.distributed as dist
from torch import Tensor


@dataclass
class OpCounter:
    """Traffic of one rank for one operation label (accumulated over calls)."""

    bytes_sent: int = 0
    bytes_received: int = 0
    messages_sent: int = 0
    messages_received: int = 0
    collectives: int = 0


class CommStats:
    """Per-operation traffic counters of one rank. ``snapshot()`` is JSON-ready."""

    def __init__(self) -> None:
        self.ops: dict[str, OpCounter] = {}

    def record(self, op: str, *, sent: int = 0, received: int = 0, messages_sent: int = 0,
               messages_received: int = 0) -> None:
        counter = self.ops.setdefault(op, OpCounter())
        counter.bytes_sent += int(sent)
        counter.bytes_received += int(received)
        counter.messages_sent += int(messages_sent)
        counter.messages_received += int(messages_received)
        counter.collectives += 1

    def reset(self) -> None:
        self.ops.clear()

    def snapshot(self) -> dict[str, dict[str, int]]:
        return {op: asdict(counter) for op, counter in sorted(self.ops.items())}

    def total(self) -> OpCounter:
        total = OpCounter()
        for counter in self.ops.values():
            for key, value in asdict(counter).items():
                setattr(total, key, getattr(total, key) + value)
        return total


def _nbytes(tensor: Tensor) -> int:
    return tensor.numel() * tensor.element_size()


def broadcast(stats: CommStats, op: str, tensor: Tensor, root: int, ranks: Sequence[int],
              group: dist.ProcessGroup | None) -> None:
    """``tensor`` of global rank ``root`` copied into ``tensor`` of every rank in ``ranks``."""
    if len(ranks) == 1:
        return
    dist.broadcast(tensor, src=root, group=group)
    if dist.get_rank() == root:
        stats.record(op, sent=(len(ranks) - 1) * _nbytes(tensor), messages_sent=len(ranks) - 1)
    else:
        stats.record(op, received=_nbytes(tensor), messages_received=1)


def reduce_sum(stats: CommStats, op: str, tensor: Tensor, root: int, ranks: Sequence[int],
               group: dist.ProcessGroup | None) -> None:
    """Sum of ``tensor`` over ``ranks`` into ``tensor`` of ``root`` (others: undefined)."""
    if len(ranks) == 1:
        return
    dist.reduce(tensor, dst=root, op=dist.ReduceOp.SUM, group=group)
    if dist.get_rank() == root:
        stats.record(op, received=(len(ranks) - 1) * _nbytes(tensor),
                     messages_received=len(ranks) - 1)
    else:
        stats.record(op, sent=_nbytes(tensor), messages_sent=1)


def all_reduce_sum(stats: CommStats, op: str, tensor: Tensor, ranks: Sequence[int],
                   group: dist.ProcessGroup | None) -> None:
    """In-place sum of ``tensor`` over ``ranks``."""
    g = len(ranks)
    if g == 1:
        return
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM, group=group)
    volume = 2 * (g - 1) * _nbytes(tensor) // g
    stats.record(op, sent=volume, received=volume, messages_sent=2 * (g - 1),
                 messages_received=2 * (g - 1))


def all_to_all_rows(stats: CommStats, op: str, send: Tensor, send_splits: Sequence[int],
                    recv_splits: Sequence[int], rank_in_group: int,
                    group: dist.ProcessGroup | None, async_op: bool = False
                    ) -> tuple[Tensor, dist.Work | None]:
    """Rows ``send`` split by destination (``send_splits``) exchanged in one
    ``all_to_all_single``; returns the received rows (split by source) and the pending work."""
    recv = send.new_empty((sum(recv_splits),) + tuple(send.shape[1:]))
    row_bytes = send.element_size() * math.prod(send.shape[1:])
    work = dist.all_to_all_single(recv, send.contiguous(), output_split_sizes=list(recv_splits),
                                  input_split_sizes=list(send_splits), group=group,
                                  async_op=async_op)
    others = [q for q in range(len(send_splits)) if q != rank_in_group]
    stats.record(op, sent=row_bytes * sum(send_splits[q] for q in others),
                 received=row_bytes * sum(recv_splits[q] for q in others),
                 messages_sent=sum(1 for q in others if send_splits[q]),
                 messages_received=sum(1 for q in others if recv_splits[q]))
    return recv, work
