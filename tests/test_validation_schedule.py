"""``trainer.val_every_n_steps``: validation every N optimiser steps, counted across epochs (the
learning curve of sampled training, whose epoch is thousands of steps), instead of every
``val_every_n_epochs`` epochs."""

from __future__ import annotations

from pathlib import Path

import pytest
import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader, TensorDataset

from trkx.training.options import TrainerOptions
from trkx.training.trainer import build_trainer


class CountingModule(pl.LightningModule):
    """A linear fit that records the global step of every validation."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(2, 1)
        self.validated_at: list[int] = []

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.mse_loss(self.layer(x), y)

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val_loss", torch.nn.functional.mse_loss(self.layer(x), y))

    def on_validation_epoch_end(self) -> None:
        if not self.trainer.sanity_checking:
            self.validated_at.append(self.global_step)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


def loader() -> DataLoader:
    """Two batches: an epoch is two steps."""
    x = torch.randn(4, 2)
    return DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=2)


def validations(tmp_path: Path, **options) -> list[int]:
    module = CountingModule()
    trainer = build_trainer(TrainerOptions(max_steps=9, logger="none", progress_bar=False,
                                           **options), tmp_path)
    trainer.fit(module, loader(), loader())
    return module.validated_at


def test_every_n_steps_crosses_epochs(tmp_path: Path) -> None:
    assert validations(tmp_path / "steps", val_every_n_steps=3) == [3, 6, 9]
    assert validations(tmp_path / "epochs", val_every_n_epochs=2) == [4, 8]


def test_a_step_interval_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="val_every_n_steps"):
        TrainerOptions(max_steps=10, val_every_n_steps=0)
