"""Script for the Lightning test: Trainer(strategy="graph_parallel") on 2 CPU processes.

Run as ``python tests/lightning_graph_parallel.py EVENTS_DIR OUT.pt`` (Lightning re-launches the
script once per extra rank); rank 0 writes the trained state_dict.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader

from tests.test_distributed_train import (  # the same run as the torchrun test
    CLIP,
    EPOCHS,
    LOSS,
    MODEL,
    SEED,
    loss_weights,
)
from trkx.data.record import load_record
from trkx.gnn.distributed.lightning import register_graph_parallel_strategy
from trkx.gnn.local_ops import CsrGraphOps
from trkx.gnn.metrics import weighted_bce
from trkx.gnn.model import InteractionGNN


class EdgeClassifier(pl.LightningModule):
    """The module contract: ops from the batch when present, a weighted mean edge loss and
    its normaliser."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(SEED)
        self.model = InteractionGNN(**MODEL)

    def training_step(self, batch, batch_idx):
        ops = getattr(batch, "graph_ops", None) or CsrGraphOps(batch.edge_index, batch.num_nodes)
        return weighted_bce(self.model(batch.x, ops), batch.y, loss_weights(batch))

    def edge_loss_normaliser(self, batch) -> float:
        return float(loss_weights(batch).sum())

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=LOSS["learning_rate"], weight_decay=0.0)


def first(items):
    return items[0]


def main(events_dir: str, out: str, strategy: str) -> None:
    register_graph_parallel_strategy()
    events = [load_record(p) for p in sorted(Path(events_dir).glob("*.pt"))]
    loader = DataLoader(events, batch_size=1, shuffle=False, collate_fn=first)
    module = EdgeClassifier()
    trainer = pl.Trainer(strategy=strategy, accelerator="cpu", devices=2, max_epochs=EPOCHS,
                         gradient_clip_val=CLIP,
                         logger=False, enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False)
    trainer.fit(module, loader)
    if trainer.global_rank == 0:
        torch.save(module.model.state_dict(), out)


if __name__ == "__main__":
    main(*sys.argv[1:4])
