"""``build_trainer``: the one ``pytorch_lightning.Trainer`` factory of every stage.

The run folder ``root_dir`` receives ``last.ckpt`` (after every training epoch, at the end, and
when the run is interrupted), ``best.ckpt`` (the best validation of ``monitor``) and, with
``logger: csv``, ``logs/``. Distributed training passes its ``strategy`` (e.g.
``graph_parallel``) and gets the same checkpointing, validation, ``max_time`` and early stopping.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from trkx.training.options import TrainerOptions

LAST = "last.ckpt"
BEST = "best"


def _callbacks_module():
    import pytorch_lightning as pl

    class LastCheckpoint(pl.Callback):
        """Saves ``last.ckpt`` after every training epoch and when the run is interrupted."""

        def __init__(self, path: Path) -> None:
            self.path = Path(path)
            self.interrupted = False

        def on_train_epoch_end(self, trainer: pl.Trainer, module: pl.LightningModule) -> None:
            trainer.save_checkpoint(self.path, weights_only=False)

        def on_exception(self, trainer: pl.Trainer, module: pl.LightningModule,
                         exception: BaseException) -> None:
            if isinstance(exception, KeyboardInterrupt):
                self.interrupted = True
                trainer.save_checkpoint(self.path, weights_only=False)

    return LastCheckpoint


def build_trainer(options: TrainerOptions, root_dir: str | Path, strategy: Any = None,
                  callbacks: Sequence[Any] = (), validation: bool = True):
    """A Trainer for ``options`` writing into ``root_dir`` (see the module docstring)."""
    import pytorch_lightning as pl
    from pytorch_lightning.callbacks import EarlyStopping, ModelCheckpoint
    from pytorch_lightning.loggers import CSVLogger

    root = Path(root_dir)
    every: list[Any] = [_callbacks_module()(root / LAST)]
    if validation:
        every.append(ModelCheckpoint(dirpath=root, filename=BEST, monitor=options.monitor,
                                     mode=options.monitor_mode, save_top_k=1,
                                     enable_version_counter=False))
        if options.early_stopping_patience is not None:
            every.append(EarlyStopping(monitor=options.monitor, mode=options.monitor_mode,
                                       patience=options.early_stopping_patience))
    logger = CSVLogger(str(root), name="logs") if options.logger == "csv" else False
    return pl.Trainer(
        max_steps=-1 if options.max_steps is None else options.max_steps,
        max_epochs=-1 if options.max_epochs is None else options.max_epochs,
        max_time=options.max_time, accelerator=options.accelerator, devices=options.devices,
        precision=options.precision, strategy="auto" if strategy is None else strategy,
        check_val_every_n_epoch=(None if options.val_every_n_steps
                                 else options.val_every_n_epochs),
        val_check_interval=options.val_every_n_steps or 1.0,
        log_every_n_steps=options.log_every_n_steps,
        gradient_clip_val=options.gradient_clip_val,
        enable_progress_bar=options.progress_bar, enable_model_summary=False,
        enable_checkpointing=validation, logger=logger, default_root_dir=str(root),
        callbacks=[*every, *callbacks], limit_val_batches=None if validation else 0)
