"""Sampled minibatches for GNN training: the ``sampling`` config section and its data loader.

Config (``configs/gnn_sampled.yaml``), mapped one-to-one onto :class:`SamplingConfig`:

    sampling: {method: shadow, targets_per_batch: 512, hops: 9, fanout: [...], bulk: 8}

Every epoch (seeded by ``seed`` and the epoch number) visits the events in a random order; the
target hits of an event (its hits with at least one edge) are cut into minibatches of
``targets_per_batch``, so each such hit is a target once per epoch: in random order
(``method: shadow``), or in contiguous (eta, phi) patches (``method: patches``,
trkx.gnn.sampling.patches: most of a minibatch's edges then count in the loss). Minibatches
are sampled ``bulk`` at a time by one set of sparse products
(:func:`trkx.gnn.sampling.sampler.sample_subgraphs`) and yielded one by one as ``Record`` records
with a ``target_edge_mask`` (GNNModule then counts only those edges in the loss).

Interleaving: the events are taken ``interleave`` (W) at a time, in that random order; the
minibatches of the W events are cut into blocks of ``bulk`` consecutive ones of one event and
the blocks of all W events are shuffled together, so consecutive steps come from different
events. With W = 1 an event's minibatches follow one another: a pile-up-200 event at 64 targets
per minibatch is ~2,000 steps, long enough for the network to drift towards that one event
(docs/levers.md). The W events' records and sparse matrices stay in memory during their turn.

Record-parallel: under ``torch.distributed`` (Lightning DDP, torchrun) rank r of P takes the
minibatches r, r + P, ... of each turn's list (W events), padded by wrap-around to a multiple of
P so that every rank takes the same number of steps; the targets do not depend on P, so the
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

from trkx.data.record import POS
from trkx.data.record_type import Record
from trkx.gnn.sampling.patches import patch_targets
from trkx.gnn.sampling.sampler import (
    sample_subgraphs,
    source_incidence_transposed,
    symmetric_adjacency,
)

METHODS: tuple[str, ...] = ("shadow", "patches")


@dataclass(frozen=True)
class SamplingConfig:
    """How training minibatches are sampled.

    Args:
        method: each minibatch is the ``hops``-hop neighbourhood of its targets, drawn at random
            (``shadow``) or as one (eta, phi) patch of the event (``patches``).
        targets_per_batch: target hits per minibatch.
        hops: L, hops of frontier expansion (``n_graph_iters + 1`` makes the target-edge
            scores exact when ``fanout`` is empty: see trkx.gnn.sampling.sampler).
        fanout: per hop, at most this many neighbours drawn per frontier hit (0: all); empty
            or None: no limit.
        bulk: k, minibatches sampled together by one set of sparse products (and the block of
            one event that interleaving moves as a unit).
        max_nodes: at most this many hits per minibatch (targets included; hits beyond it are
            dropped uniformly from the outermost hops); None: no cap.
        interleave: W, events whose minibatches are shuffled together (module docstring);
            1: one event after the other.
        patch_eta_width: with ``method: patches``, the width in eta of a patch's band.
    """

    method: str = "shadow"
    targets_per_batch: int = 512
    hops: int = 9
    fanout: Sequence[int] | None = field(default=None)
    bulk: int = 8
    max_nodes: int | None = None
    interleave: int = 1
    patch_eta_width: float = 0.5

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"method {self.method!r} is not one of {', '.join(METHODS)}")
        if self.targets_per_batch < 1 or self.bulk < 1 or self.interleave < 1:
            raise ValueError("targets_per_batch, bulk and interleave must be >= 1")
        if self.patch_eta_width <= 0:
            raise ValueError(f"patch_eta_width must be > 0, got {self.patch_eta_width}")
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
    """Iterable of minibatch ``Record`` records sampled from ``events`` (a sequence of full event
    graphs with ``x``, ``edge_index``, ``y``, ``signal``, e.g. a GraphRecordDataset).

    ``rank``/``world_size`` default to the ``torch.distributed`` process group at iteration
    time. The epoch counts the iterations started (or is set by :meth:`set_epoch`).
    """

    def __init__(self, events: Sequence[Record], config: SamplingConfig, seed: int = 0,
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

    def minibatch_targets(self, data: Record, generator: torch.Generator) -> list[Tensor]:
        """The target sets of one event for one epoch, in order (all ranks together)."""
        num_nodes = int(data.num_nodes)
        degree = torch.bincount(data.edge_index.reshape(-1).long().cpu(), minlength=num_nodes)
        candidates = torch.nonzero(degree > 0).flatten()
        if self.config.method == "patches":
            if POS not in data:
                raise ValueError("sampling method patches needs the records' hit positions "
                                 f"({POS!r}), which these records lack")
            return patch_targets(candidates, data[POS].cpu(), self.config.targets_per_batch,
                                 self.config.patch_eta_width, generator)
        order = candidates[torch.randperm(candidates.numel(), generator=generator)]
        return list(torch.split(order, self.config.targets_per_batch))

    def __iter__(self) -> Iterator[Record]:
        default_rank, default_world = _rank_and_world()
        rank = default_rank if self.rank is None else self.rank
        world = default_world if self.world_size is None else self.world_size
        epoch, self.epoch = self.epoch, self.epoch + 1
        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch)
        order = torch.randperm(len(self.events), generator=generator).tolist()
        turn = self.config.interleave
        for start in range(0, len(order), turn):
            yield from self._sample_turn(order[start:start + turn], generator, epoch, rank, world)

    def _sample_turn(self, indices: list[int], generator: torch.Generator, epoch: int,
                     rank: int, world: int) -> Iterator[Record]:
        """The minibatches of the events ``indices`` (one turn), interleaved when W > 1."""
        k = self.config.bulk
        events: dict[int, _EventSampler] = {}
        blocks: list[tuple[int, list[Tensor]]] = []
        for index in indices:
            data = self.events[index]
            targets = self.minibatch_targets(data, generator)
            if not targets:
                continue
            events[index] = _EventSampler(data, self.config, self.seed, epoch, index, rank)
            blocks += [(index, targets[i:i + k]) for i in range(0, len(targets), k)]
        if self.config.interleave > 1 and len(blocks) > 1:
            blocks = [blocks[i] for i in torch.randperm(len(blocks), generator=generator)]
        flat = [(index, t) for index, block in blocks for t in block]
        if not flat:
            return
        padded = [flat[i % len(flat)] for i in range(-(-len(flat) // world) * world)]
        mine = padded[rank::world]
        run_start = 0
        for i in range(1, len(mine) + 1):   # runs of one event, sampled k at a time
            if i == len(mine) or mine[i][0] != mine[run_start][0] or i - run_start == k:
                index = mine[run_start][0]
                yield from events[index].sample([t for _, t in mine[run_start:i]])
                run_start = i


class _EventSampler:
    """One event's sparse matrices and fan-out random stream, built once per turn."""

    def __init__(self, data: Record, config: SamplingConfig, seed: int, epoch: int, index: int,
                 rank: int) -> None:
        self.data, self.config = data, config
        edge_index = data.edge_index.long()
        self.adjacency = symmetric_adjacency(edge_index, int(data.num_nodes))
        self.incidence = source_incidence_transposed(edge_index, int(data.num_nodes))
        self.generator = None
        if config.fanout or config.max_nodes is not None:
            stream = ((seed * 1_000_003 + epoch) * 1_000_003 + index) * 4096 + rank
            self.generator = torch.Generator(device=data.edge_index.device).manual_seed(
                stream % 2 ** 63)

    def sample(self, targets: list[Tensor]) -> list[Record]:
        device = self.data.edge_index.device
        return sample_subgraphs(self.data, [t.to(device) for t in targets], self.config.hops,
                                self.config.fanout, self.generator, self.adjacency,
                                self.incidence, max_nodes=self.config.max_nodes)


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
