"""Script for the Lightning tests: ``GNNModule`` + ``Trainer(strategy=...)`` on CPU (float64).

Run as ``python tests/lightning_graph_parallel.py TRAIN_DIR VAL_DIR OUT_DIR STRATEGY DEVICES``
(Lightning re-launches the script once per extra rank). Every rank writes
``OUT_DIR/rank{r}.pt``: the (DDP-reduced) parameter gradients before every optimiser step, the
trained weights and the validation metrics Lightning reports.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader

from tests.distributed_reference import CLIP, EPOCHS, LOSS, load_events, make_model
from trkx.gnn.distributed.lightning import register_graph_parallel_strategy
from trkx.gnn.module import GNNModule


class GradientRecorder(pl.Callback):
    """The gradients the optimiser is about to use (after DDP's reduction, before clipping)."""

    def __init__(self) -> None:
        self.steps: list[dict[str, torch.Tensor]] = []

    def on_before_optimizer_step(self, trainer, pl_module, optimizer) -> None:
        self.steps.append({name: p.grad.detach().clone()
                           for name, p in pl_module.model.named_parameters()})


def first(items):
    return items[0]


def main(train_dir: str, val_dir: str, out_dir: str, strategy: str, devices: str) -> None:
    register_graph_parallel_strategy()
    module = GNNModule(make_model(), graph_ops="csr", lr_step_size=1000,  # a constant rate
                       **LOSS)
    recorder = GradientRecorder()
    trainer = pl.Trainer(strategy=strategy, accelerator="cpu", devices=int(devices),
                         max_epochs=EPOCHS, gradient_clip_val=CLIP, num_sanity_val_steps=0,
                         logger=False, enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, callbacks=[recorder])
    train = DataLoader(load_events(train_dir), batch_size=1, shuffle=False, collate_fn=first)
    val = DataLoader(load_events(val_dir), batch_size=1, shuffle=False, collate_fn=first)
    trainer.fit(module, train, val)
    metrics = {k: float(v) for k, v in trainer.callback_metrics.items() if k.startswith("val_")}
    torch.save({"grads": recorder.steps, "state": module.model.state_dict(),
                "metrics": metrics}, Path(out_dir) / f"rank{trainer.global_rank}.pt")


if __name__ == "__main__":
    main(*sys.argv[1:6])
