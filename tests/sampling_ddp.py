"""Script for the sampled-minibatch DDP test: Lightning ``strategy="ddp"`` on 2 CPU processes
(gloo), float64, GNNModule on SampledMinibatches. Lightning re-launches the script for rank 1.

Run as ``python tests/sampling_ddp.py OUT_DIR``; every rank writes the parameter gradients it
sees before each optimiser step (after DDP's all-reduce) to ``OUT_DIR/grads_rank{r}.pt``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader

from trkx.gnn.model import InteractionGNN
from trkx.gnn.module import GNNModule
from trkx.gnn.sampling.datamodule import SampledMinibatches, SamplingConfig

MODEL = {"node_features": 3, "hidden": 8, "n_graph_iters": 1, "n_mlp_layers": 1}
MODULE = {"graph_ops": "csr", "learning_rate": 1e-2, "signal_weight": 3.0,
          "lr_step_size": 1000}  # a constant rate over the few steps compared
SAMPLING = SamplingConfig(targets_per_batch=6, hops=2, bulk=2)
SEED, STEPS = 5, 3


def events():
    from tests.test_sampling import random_graph
    out = []
    for seed in (1, 2):
        data = random_graph(seed, 60, 90)
        data.x = data.x.double()
        out.append(data)
    return out


def make_module() -> GNNModule:
    torch.manual_seed(SEED)
    return GNNModule(InteractionGNN(**MODEL), **MODULE)


class RecordGradients(pl.Callback):
    def __init__(self) -> None:
        self.steps: list[dict[str, torch.Tensor]] = []

    def on_before_optimizer_step(self, trainer, module, optimizer) -> None:
        self.steps.append({name: p.grad.detach().clone()
                           for name, p in module.model.named_parameters()})


def main(out: str) -> None:
    module = make_module()
    recorder = RecordGradients()
    loader = DataLoader(SampledMinibatches(events(), SAMPLING, seed=SEED), batch_size=None)
    trainer = pl.Trainer(strategy="ddp", accelerator="cpu", devices=2, precision="64-true",
                         max_steps=STEPS, callbacks=[recorder], logger=False,
                         enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False)
    trainer.fit(module, loader)
    torch.save(recorder.steps, Path(out) / f"grads_rank{trainer.global_rank}.pt")


if __name__ == "__main__":
    main(sys.argv[1])
