"""Distributed GNN training: ``torchrun --nproc-per-node P -m trkx train gnn --config C``.

The config is ``configs/gnn.yaml``'s format plus a ``distributed`` section
(``configs/gnn_distributed.yaml``):

    data:         DistributedData   (train_dir, pattern, max_events)
    model:        InteractionGNN    (node_features read from the records when omitted)
    module:       LossConfig        (GNNModule's optimiser and edge-weight settings)
    trainer:      LoopConfig        (max_epochs, gradient_clip_val, seed)
    distributed:  GraphParallel     (algorithm, partitioner, replication, timeout_s)

Every rank reads each event record, keeps its block (:class:`~.factory.GraphParallel`), runs
the same ``InteractionGNN`` on it through the distributed ``GraphOps`` and minimises its share
of the single-process loss ``sum_k w_k BCE_k / sum_k w_k`` (GNNModule's weighted BCE;
:mod:`.bookkeeping`); gradients are summed over the ranks, then clipped, so each optimiser step
is the single-process step. Rank 0 logs the global loss and its traffic per step and writes
``OUTPUT/gnn.pt`` in the format of :mod:`trkx.gnn.checkpoint` (so ``trkx infer gnn`` reads it).
A failing rank makes the others raise after ``distributed.timeout_s`` (collective timeout);
under torchrun the elastic agent also stops the whole group.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SECTIONS = ("data", "model", "module", "trainer", "distributed")
# Lightning Trainer keys of configs/gnn.yaml that the torchrun loop does not need
LIGHTNING_ONLY = frozenset({"accelerator", "devices", "log_every_n_steps", "num_nodes",
                            "strategy", "enable_progress_bar", "default_root_dir"})
log = logging.getLogger("trkx.gnn.distributed")


@dataclass(frozen=True)
class DistributedData:
    """Filter-stage event records (``x``, ``pos``, ``edge_index``, ``y``, ``signal``)."""

    train_dir: str | None = None
    pattern: str = "*.pt"
    max_events: int | None = None


@dataclass(frozen=True)
class LossConfig:
    """The optimiser and loss settings of :class:`trkx.gnn.module.GNNModule` (``graph_ops``,
    ``lr_step_size``, ``lr_gamma``, ``edge_cut`` are accepted for config compatibility)."""

    learning_rate: float = 1e-3
    weight_decay: float = 0.0
    signal_weight: float = 2.0
    true_weight: float = 1.0
    fake_weight: float = 1.0
    lr_step_size: int = 0
    lr_gamma: float = 0.5
    graph_ops: str = "auto"
    edge_cut: float = 0.5


@dataclass(frozen=True)
class LoopConfig:
    max_epochs: int = 1
    gradient_clip_val: float | None = None
    seed: int = 0


def train_from_config(config: dict[str, Any], output: str | os.PathLike,
                      label: str = "config", train_dir: str | None = None,
                      seed: int | None = None) -> int:
    """Run distributed training as ``config`` says, writing ``output/gnn.pt``; exit code."""
    import torch
    import torch.distributed as dist
    from tqdm import tqdm

    from trkx.config import ConfigError, check_sections, instantiate, section
    from trkx.data.record import load_record
    from trkx.gnn.checkpoint import save_gnn_checkpoint
    from trkx.gnn.metrics import edge_weights
    from trkx.gnn.model import InteractionGNN
    from trkx.gnn.records import check_graph_record, node_features_of, record_paths

    from .bookkeeping import all_reduce_gradients, rank_loss, reported_loss
    from .factory import GraphParallel, init_process_group

    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    check_sections(config, SECTIONS, label)
    data_section = section(config, "data", label)
    if train_dir:
        data_section["train_dir"] = train_dir
    data_section.pop("val_dir", None)          # validation runs single-process (trkx infer)
    data_cfg = instantiate(DistributedData, data_section, f"{label}: data")
    if not data_cfg.train_dir:
        raise ConfigError(f"{label}: data.train_dir is not set (set it or pass --train-dir)")
    loss_cfg = instantiate(LossConfig, section(config, "module", label), f"{label}: module")
    loop_section = section(config, "trainer", label)
    loop_cfg = instantiate(LoopConfig, {k: v for k, v in loop_section.items()
                                        if k not in LIGHTNING_ONLY}, f"{label}: trainer")
    dist_cfg = section(config, "distributed", label)
    paths = record_paths(data_cfg.train_dir, data_cfg.pattern)[:data_cfg.max_events]
    model_cfg = section(config, "model", label)
    model_cfg.setdefault("node_features", node_features_of(paths[0]))

    init_process_group(timeout_s=float(dist_cfg.get("timeout_s", 300.0)))
    try:
        parallel = instantiate(GraphParallel, dist_cfg, f"{label}: distributed")
        rank = dist.get_rank()
        device = _device()
        torch.manual_seed(loop_cfg.seed if seed is None else seed)
        model = instantiate(InteractionGNN, model_cfg, f"{label}: model").to(device)
        for p in model.parameters():             # identical start on every rank
            dist.broadcast(p.data, src=0)
        opt = torch.optim.AdamW(model.parameters(), lr=loss_cfg.learning_rate,
                                weight_decay=loss_cfg.weight_decay)
        sched = (torch.optim.lr_scheduler.StepLR(opt, loss_cfg.lr_step_size, loss_cfg.lr_gamma)
                 if loss_cfg.lr_step_size > 0 else None)
        if rank == 0:
            log.info("%s; algorithm %s, partitioner %s; %d events", parallel.layout.describe(),
                     parallel.algorithm, parallel.partitioner, len(paths))
        parts: dict[Path, Any] = {}
        for epoch in range(loop_cfg.max_epochs):
            for path in tqdm(paths, desc=f"epoch {epoch}", disable=rank != 0):
                data = load_record(path)
                check_graph_record(data, str(path))
                if "pos" not in data:
                    raise KeyError(f"{path}: event record has no 'pos' (needed to partition)")
                if path not in parts:
                    parts[path] = parallel.shard(data.edge_index, data.num_nodes, data.pos)
                part = parts[path]
                weights = edge_weights(data.y, data.signal, loss_cfg.signal_weight,
                                       loss_cfg.true_weight, loss_cfg.fake_weight)
                x = data.x[part.nodes].to(device)
                y = data.y[part.edges].to(device)
                parallel.stats.reset()
                start = time.perf_counter()
                logits = model(x, part.ops)
                terms = torch.nn.functional.binary_cross_entropy_with_logits(
                    logits, y.to(logits.dtype), reduction="none")
                local_w = weights[part.edges].to(device, terms.dtype)
                loss = rank_loss(local_w * terms, weights.sum().clamp_min(1e-12),
                                 parallel.replication)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                all_reduce_gradients(model.parameters())
                if loop_cfg.gradient_clip_val:
                    torch.nn.utils.clip_grad_norm_(model.parameters(),
                                                   loop_cfg.gradient_clip_val)
                opt.step()
                value = reported_loss(loss)
                traffic = parallel.stats.total()
                if rank == 0:
                    log.info("epoch %d %s: loss %.5f, step %.3f s, rank 0 sent %d B received "
                             "%d B in %d/%d messages", epoch, path.name, value,
                             time.perf_counter() - start, traffic.bytes_sent,
                             traffic.bytes_received, traffic.messages_sent,
                             traffic.messages_received)
            if sched is not None:
                sched.step()
        if rank == 0:
            module_cfg = section(config, "module", label)
            written = save_gnn_checkpoint(Path(output) / "gnn.pt", model, model_cfg, module_cfg)
            log.info("wrote %s", written)
        dist.barrier()
        return 0
    finally:
        dist.destroy_process_group()


def _device():
    import torch
    if torch.cuda.is_available():
        local = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local)
        return torch.device("cuda", local)
    return torch.device("cpu")


def main(argv: list[str] | None = None) -> int:
    """``python -m trkx.gnn.distributed.train --config C --output O [KEY=VALUE ...]``."""
    from trkx.config import apply_overrides, load_config
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("--output", required=True, help="folder for gnn.pt")
    parser.add_argument("--train-dir")
    parser.add_argument("overrides", nargs="*", help="section.key=value")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    config = apply_overrides(load_config(args.config), args.overrides)
    return train_from_config(config, args.output, label=args.config, train_dir=args.train_dir)


if __name__ == "__main__":
    sys.exit(main())
