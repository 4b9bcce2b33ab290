"""``build_trainer``: the one ``pytorch_lightning.Trainer`` factory of every stage.

The run folder ``root_dir`` receives ``last.ckpt`` (after every training epoch, one step after
every validation, at the end, and when the run is interrupted: a run killed without warning
loses at most the steps since its last validation), ``best.ckpt`` (the best validation of
``monitor``) and, with ``logger: csv``, ``logs/`` (with ``train_seconds``, the training time
summed over resumed stretches, beside every validation). Distributed training passes its
``strategy`` (e.g. ``graph_parallel``) and gets the same checkpointing, validation,
``max_time`` and early stopping.

Every run is watched for memory (``MemoryGuard``): after each training step the process's
resident set size (RSS, ``/proc/self/statm``) is compared with ``max_memory_gb`` (default 0.85
of the machine's memory); above it the run saves ``last.ckpt`` and stops at once (no
validation), and ``fit_stage`` reports it in one line, so a run that grows resumes instead of
thrashing the machine. The RSS is logged as ``rss_gb`` beside every validation (the memory
curve of a long run).
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from trkx.training.options import TrainerOptions

LAST = "last.ckpt"
BEST = "best"
class MemoryLimitSignal(RuntimeError):
    """Raised inside ``Trainer.fit`` by the memory guard (one line: the RSS, the limit, the
    step); ``last.ckpt`` is written on it."""


#: Share of the machine's memory a run may hold when ``max_memory_gb`` is null.
DEFAULT_MEMORY_SHARE = 0.85


def resident_bytes() -> int | None:
    """This process's resident set size in bytes (None where /proc is not available)."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def memory_limit_bytes(max_memory_gb: float | None) -> int | None:
    """``max_memory_gb`` in bytes, or DEFAULT_MEMORY_SHARE of the physical memory when null."""
    if max_memory_gb is not None:
        return int(max_memory_gb * 1e9)
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (OSError, ValueError):
        return None
    return int(DEFAULT_MEMORY_SHARE * total)


def _callbacks_module():
    import pytorch_lightning as pl

    class LastCheckpoint(pl.Callback):
        """Saves ``last.ckpt`` after every training epoch, after the first step that follows
        each validation during training (by then the best-model callback, which Lightning runs
        after this one, has recorded that validation), and when the run is interrupted."""

        def __init__(self, path: Path) -> None:
            self.path = Path(path)
            self.interrupted = False
            self.validated = False

        def on_train_epoch_end(self, trainer: pl.Trainer, module: pl.LightningModule) -> None:
            trainer.save_checkpoint(self.path, weights_only=False)

        def on_validation_end(self, trainer: pl.Trainer, module: pl.LightningModule) -> None:
            self.validated = trainer.state.fn == "fit" and not trainer.sanity_checking

        def on_train_batch_end(self, trainer: pl.Trainer, module: pl.LightningModule,
                               *args: Any) -> None:
            if self.validated:
                self.validated = False
                trainer.save_checkpoint(self.path, weights_only=False)

        def on_exception(self, trainer: pl.Trainer, module: pl.LightningModule,
                         exception: BaseException) -> None:
            if isinstance(exception, (KeyboardInterrupt, MemoryLimitSignal)):
                self.interrupted = isinstance(exception, KeyboardInterrupt)
                trainer.save_checkpoint(self.path, weights_only=False)

    class TrainingClock(pl.Callback):
        """Training seconds (validation excluded) summed over every stretch of a resumed run
        (kept in the checkpoint), logged as ``train_seconds`` with every validation during
        training: the time axis of the learning curves."""

        def __init__(self) -> None:
            self.seconds = 0.0
            self.since: float | None = None

        def _tick(self) -> None:
            if self.since is not None:
                now = time.perf_counter()
                self.seconds += now - self.since
                self.since = now

        def on_train_batch_start(self, trainer: pl.Trainer, module: pl.LightningModule,
                                 *args: Any) -> None:
            if self.since is None:
                self.since = time.perf_counter()

        def on_validation_start(self, trainer: pl.Trainer, module: pl.LightningModule) -> None:
            self._tick()
            self.since = None

        def on_validation_epoch_end(self, trainer: pl.Trainer,
                                    module: pl.LightningModule) -> None:
            if trainer.state.fn == "fit" and not trainer.sanity_checking:
                module.log("train_seconds", self.seconds)

        def state_dict(self) -> dict[str, float]:
            self._tick()
            return {"seconds": self.seconds}

        def load_state_dict(self, state_dict: dict[str, float]) -> None:
            self.seconds = float(state_dict.get("seconds", 0.0))

    class MemoryGuard(pl.Callback):
        """Stops the run when the RSS passes ``limit`` bytes, checked after every training
        step: it raises :class:`MemoryLimitSignal` (every rank at once: the decision is
        reduced over the ranks), on which ``LastCheckpoint`` writes a resumable ``last.ckpt``
        and nothing else runs (no validation on a process already over its limit). Logs
        ``rss_gb`` with every validation during training."""

        def __init__(self, limit: int | None, default: bool) -> None:
            self.limit, self.default = limit, default

        def on_train_batch_end(self, trainer: pl.Trainer, module: pl.LightningModule,
                               *args: Any) -> None:
            if self.limit is None:
                return
            rss = resident_bytes()
            over = rss is not None and rss > self.limit
            if trainer.world_size > 1:
                over = trainer.strategy.reduce_boolean_decision(over, all=False)
            if over:
                source = ("the default, 0.85 of the machine's memory" if self.default
                          else "trainer.max_memory_gb")
                raise MemoryLimitSignal(
                    f"resident memory {(rss or 0) / 1e9:.3g} GB passed {self.limit / 1e9:.3g} GB "
                    f"({source}) at step {trainer.global_step}: stopped with a resumable "
                    "last.ckpt (run the same command to resume; raise trainer.max_memory_gb "
                    "if the run needs more)")

        def on_validation_epoch_end(self, trainer: pl.Trainer,
                                    module: pl.LightningModule) -> None:
            rss = resident_bytes()
            if rss is not None and trainer.state.fn == "fit" and not trainer.sanity_checking:
                module.log("rss_gb", rss / 1e9)

    return LastCheckpoint, TrainingClock, MemoryGuard


def build_trainer(options: TrainerOptions, root_dir: str | Path, strategy: Any = None,
                  callbacks: Sequence[Any] = (), validation: bool = True):
    """A Trainer for ``options`` writing into ``root_dir`` (see the module docstring)."""
    import pytorch_lightning as pl
    from pytorch_lightning.callbacks import EarlyStopping, ModelCheckpoint
    from pytorch_lightning.loggers import CSVLogger

    root = Path(root_dir)
    last_checkpoint, clock, memory_guard = _callbacks_module()
    every: list[Any] = [last_checkpoint(root / LAST), clock(),
                        memory_guard(memory_limit_bytes(options.max_memory_gb),
                                     options.max_memory_gb is None)]
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
