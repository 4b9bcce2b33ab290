"""Distributed GNN training: ``torchrun --nproc-per-node P -m trkx train gnn --config C``.

The config (``configs/gnn_distributed.yaml``) has the sections

    model:        InteractionGNN keyword arguments
    data:         DataConfig  (folder of event records with x, pos, edge_index and a target)
    optimizer:    OptimConfig (AdamW, epochs, positive-class weight, seed)
    distributed:  GraphParallel keyword arguments (algorithm, partitioner, replication, timeout)
    output:       OutputConfig (checkpoint path)

Every rank reads each event record, keeps its block (:class:`~.factory.GraphParallel`), runs
the same ``InteractionGNN`` on it through the distributed ``GraphOps``, and minimises its share
``L_r`` of the single-process loss (:mod:`.bookkeeping`); parameter gradients are summed over
all ranks, so each optimiser step is the single-process step. Rank 0 logs the global loss and
the bytes the rank moved per iteration, and writes the checkpoint atomically.
A failing rank makes the others raise after ``distributed.timeout_s`` (collective timeout);
under torchrun the agent also stops the whole group.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

SECTIONS = ("model", "data", "optimizer", "distributed", "output")
log = logging.getLogger("trkx.gnn.distributed")


@dataclass(frozen=True)
class DataConfig:
    """Event records (``save_record`` files, ``*.pt``) with ``x``, ``pos``, ``edge_index`` and
    the edge target ``target`` (default ``y``)."""

    input_dir: str
    target: str = "y"
    max_events: int | None = None


@dataclass(frozen=True)
class OptimConfig:
    lr: float = 1e-3
    weight_decay: float = 0.0
    epochs: int = 1
    pos_weight: float = 1.0
    seed: int = 0


@dataclass(frozen=True)
class OutputConfig:
    checkpoint: str | None = None


def train_from_config(config: dict[str, Any], label: str = "config") -> int:
    """Run distributed training as the config says; returns a process exit code."""
    import torch
    import torch.distributed as dist
    from tqdm import tqdm

    from trkx.config import check_sections, instantiate, section
    from trkx.data.record import load_record
    from trkx.gnn.model import InteractionGNN

    from .bookkeeping import all_reduce_gradients, rank_loss, reported_loss
    from .factory import GraphParallel, init_process_group

    check_sections(config, SECTIONS, label)
    data_cfg = instantiate(DataConfig, section(config, "data", label), f"{label}: data")
    optim = instantiate(OptimConfig, section(config, "optimizer", label), f"{label}: optimizer")
    output = instantiate(OutputConfig, section(config, "output", label), f"{label}: output")
    dist_cfg = section(config, "distributed", label)
    init_process_group(timeout_s=float(dist_cfg.get("timeout_s", 300.0)))
    try:
        parallel = instantiate(GraphParallel, dist_cfg, f"{label}: distributed")
        rank = dist.get_rank()
        device = _device()
        torch.manual_seed(optim.seed)
        model = instantiate(InteractionGNN, section(config, "model", label),
                            f"{label}: model").to(device)
        for p in model.parameters():             # identical start on every rank
            dist.broadcast(p.data, src=0)
        opt = torch.optim.AdamW(model.parameters(), lr=optim.lr,
                                weight_decay=optim.weight_decay)
        paths = _record_paths(data_cfg)
        if rank == 0:
            log.info("%s; algorithm %s, partitioner %s; %d events", parallel.layout.describe(),
                     parallel.algorithm, parallel.partitioner, len(paths))
        parts: dict[Path, Any] = {}
        for epoch in range(optim.epochs):
            for path in tqdm(paths, desc=f"epoch {epoch}", disable=rank != 0):
                data = load_record(path)
                if path not in parts:
                    parts[path] = parallel.shard(data.edge_index, data.num_nodes, data.pos)
                part = parts[path]
                target = _target(data, data_cfg.target, path)
                x = data.x[part.nodes].to(device)
                y = target[part.edges].to(device, torch.float32)
                parallel.stats.reset()
                start = time.perf_counter()
                logits = model(x, part.ops)
                terms = torch.nn.functional.binary_cross_entropy_with_logits(
                    logits, y, reduction="none",
                    pos_weight=torch.tensor(optim.pos_weight, device=device))
                loss = rank_loss(terms, data.edge_index.shape[1], parallel.replication)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                all_reduce_gradients(model.parameters())
                opt.step()
                value = reported_loss(loss)
                traffic = parallel.stats.total()
                if rank == 0:
                    log.info("epoch %d %s: loss %.5f, step %.3f s, rank 0 sent %d B received "
                             "%d B in %d/%d messages", epoch, path.name, value,
                             time.perf_counter() - start, traffic.bytes_sent,
                             traffic.bytes_received, traffic.messages_sent,
                             traffic.messages_received)
        if rank == 0 and output.checkpoint:
            _save_atomic({"model": model.state_dict(), "config": config,
                          "optimizer": asdict(optim)}, Path(output.checkpoint))
            log.info("checkpoint written to %s", output.checkpoint)
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


def _record_paths(cfg: DataConfig) -> list[Path]:
    folder = Path(cfg.input_dir)
    if not folder.is_dir():
        raise FileNotFoundError(f"data.input_dir {folder}: no such folder")
    paths = sorted(folder.glob("*.pt"))
    if cfg.max_events is not None:
        paths = paths[:cfg.max_events]
    if not paths:
        raise FileNotFoundError(f"data.input_dir {folder}: no event records (*.pt)")
    return paths


def _target(data, key: str, path: Path):
    for needed in ("edge_index", "pos", key):
        if needed not in data:
            raise KeyError(f"{path}: event record has no {needed!r} (needed for GNN training)")
    return getattr(data, key)


def _save_atomic(payload: dict, path: Path) -> None:
    import torch
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        torch.save(payload, tmp)
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> int:
    """``python -m trkx.gnn.distributed.train --config C [KEY=VALUE ...]`` (under torchrun)."""
    from trkx.config import apply_overrides, load_config
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("overrides", nargs="*", help="section.key=value")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    config = apply_overrides(load_config(args.config), args.overrides)
    return train_from_config(config, label=args.config)


if __name__ == "__main__":
    sys.exit(main())
