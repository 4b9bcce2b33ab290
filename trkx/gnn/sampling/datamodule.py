"""Sampled minibatches for GNN training: the ``sampling`` config section and its data loader.

Config (``configs/gnn_sampled.yaml``), mapped one-to-one onto :class:`SamplingConfig`:

    sampling: {method: shadow, targets_per_batch: 512, hops: 9, fanout: [...], bulk: 8}

Every epoch (seeded by ``seed`` and the epoch number) visits the events in a random order; the
target hits of an event (its hits with at least one edge, in random order) are cut into
minibatches of ``targets_per_batch``, so each such hit is a target once per epoch. Minibatches
are sampled ``bulk`` at a time by one set of sparse products
(:func:`trkx.gnn.sampling.sampler.sample_subgraphs`) and yielded one by one as ``Data`` records
with a ``target_edge_mask`` (GNNModule then counts only those edges in the loss).

Data-parallel: under ``torch.distributed`` (Lightning DDP, torchrun) rank r of P takes the
minibatches r, r + P, ... of every event, the list padded by wrap-around to a multiple of P so
that every rank takes the same number of steps; the targets do not depend on P, so the
minibatches of one step across P ranks are those of P consecutive steps of one process.
Sampling runs in the main process (``num_workers`` 0): the products are the fast part.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor
from torch.utils.data import DataLoader, IterableDataset
from torch_geometric.data import Data

from trkx.gnn.sampling.sampler import (
    sample_subgraphs,
    source_incidence_transposed,
    symmetric_adjacency,
)

METHODS: tuple[str, ...] = ("shadow",)


@dataclass(frozen=True)
class SamplingConfig:
    """How training minibatches are sampled.

    Args:
        method: ``shadow``: each minibatch is the ``hops``-hop neighbourhood of its targets.
        targets_per_batch: target hits per minibatch.
        hops: L, hops of frontier expansion (``n_graph_iters + 1`` makes the target-edge
            scores exact when ``fanout`` is empty: see trkx.gnn.sampling.sampler).
        fanout: per hop, at most this many neighbours drawn per frontier hit (0: all); empty
            or None: no limit.
        bulk: k, minibatches sampled together by one set of sparse products.
        max_nodes: at most this many hits per minibatch (targets included; hits beyond it are
            dropped uniformly from the outermost hops); None: no cap.
    """

    method: str = "shadow"
    targets_per_batch: int = 512
    hops: int = 9
    fanout: Sequence[int] | None = field(default=None)
    bulk: int = 8
    max_nodes: int | None = None

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"method {self.method!r} is not one of {', '.join(METHODS)}")
        if self.targets_per_batch < 1 or self.bulk < 1:
            raise ValueError("targets_per_batch and bulk must be >= 1")
        if self.hops < 1:
            raise ValueError(f"hops must be >= 1, got {self.hops}")
        fanout = tuple(int(f) for f in (self.fanout or ()))
        if fanout and len(fanout) != self.hops:
            raise ValueError(f"fanout needs one entry per hop ({self.hops}), got "
                             f"{list(fanout)} (or leave it empty: no limit)")
        if any(f < 0 for f in fanout):
            raise ValueError(f"fanout entries must be >= 0 (0: all), got {list(fanout)}")
        object.__setattr__(self, "fanout", fanout or None)
        if self.max_nodes is not None and self.max_nodes < self.targets_per_batch:
            raise ValueError(f"max_nodes ({self.max_nodes}) must be at least targets_per_batch "
                             f"({self.targets_per_batch}) or null")


def _rank_and_world() -> tuple[int, int]:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank(), torch.distributed.get_world_size()
    return 0, 1


class SampledMinibatches(IterableDataset):
    """Iterable of minibatch ``Data`` records sampled from ``events`` (a sequence of full event
    graphs with ``x``, ``edge_index``, ``y``, ``signal``, e.g. a GraphRecordDataset).

    ``rank``/``world_size`` default to the ``torch.distributed`` process group at iteration
    time. The epoch counts the iterations started (or is set by :meth:`set_epoch`).
    """

    def __init__(self, events: Sequence[Data], config: SamplingConfig, seed: int = 0,
                 rank: int | None = None, world_size: int | None = None) -> None:
        super().__init__()
        self.events = events
        self.config = config
        self.seed = seed
        self.rank = rank
        self.world_size = world_size
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def minibatch_targets(self, data: Data, generator: torch.Generator) -> list[Tensor]:
        """The target sets of one event for one epoch, in order (all ranks together)."""
        num_nodes = int(data.num_nodes)
        degree = torch.bincount(data.edge_index.reshape(-1).long().cpu(), minlength=num_nodes)
        candidates = torch.nonzero(degree > 0).flatten()
        order = candidates[torch.randperm(candidates.numel(), generator=generator)]
        return list(torch.split(order, self.config.targets_per_batch))

    def __iter__(self) -> Iterator[Data]:
        default_rank, default_world = _rank_and_world()
        rank = default_rank if self.rank is None else self.rank
        world = default_world if self.world_size is None else self.world_size
        epoch, self.epoch = self.epoch, self.epoch + 1
        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch)
        for index in torch.randperm(len(self.events), generator=generator).tolist():
            data = self.events[index]
            targets = self.minibatch_targets(data, generator)
            if not targets:
                continue
            padded = [targets[i % len(targets)]
                      for i in range(-(-len(targets) // world) * world)]
            mine = padded[rank::world]
            yield from self._sample_event(data, mine, epoch, index, rank)

    def _sample_event(self, data: Data, targets: list[Tensor], epoch: int, index: int,
                      rank: int) -> Iterator[Data]:
        device = data.edge_index.device
        edge_index = data.edge_index.long()
        adjacency = symmetric_adjacency(edge_index, int(data.num_nodes))
        incidence = source_incidence_transposed(edge_index, int(data.num_nodes))
        generator = None
        if self.config.fanout or self.config.max_nodes is not None:
            stream = ((self.seed * 1_000_003 + epoch) * 1_000_003 + index) * 4096 + rank
            generator = torch.Generator(device=device).manual_seed(stream % 2 ** 63)
        k = self.config.bulk
        for start in range(0, len(targets), k):
            chunk = [t.to(device) for t in targets[start:start + k]]
            yield from sample_subgraphs(data, chunk, self.config.hops, self.config.fanout,
                                        generator, adjacency, incidence,
                                        max_nodes=self.config.max_nodes)


class SampledLoader(DataLoader):
    """The DataLoader of :class:`SampledMinibatches`, resumable: its ``state_dict`` (saved by
    Lightning in ``last.ckpt``) holds the passes over the events begun so far, and a resumed run
    begins the next one. An epoch of a pile-up-200 training set is tens of thousands of steps,
    longer than a stretch of a long training; without this every resumed stretch would replay
    the first minibatches of the same epoch, and the rest of the events would never be seen.
    A resumed stretch draws a new order of every event's target hits instead (the rest of the
    interrupted pass is not replayed; each pass is a fresh random order anyway)."""

    def state_dict(self) -> dict[str, int]:
        return {"passes_begun": int(self.dataset.epoch)}

    def load_state_dict(self, state_dict: Mapping[str, int]) -> None:
        self.dataset.set_epoch(int(state_dict["passes_begun"]))


def make_train_loader(sampling_config: Mapping[str, Any], train_paths: Sequence[Path],
                      seed: int = 0, label: str = "config") -> DataLoader:
    """The training DataLoader of ``trkx train gnn`` when the config has a ``sampling``
    section: sampled minibatches of the records ``train_paths``, one per step."""
    from trkx.config import instantiate
    from trkx.gnn.records import GraphRecordDataset

    config = instantiate(SamplingConfig, sampling_config, f"{label}: sampling")
    dataset = SampledMinibatches(GraphRecordDataset(list(train_paths)), config, seed)
    return SampledLoader(dataset, batch_size=None, num_workers=0)
