"""``TrainerOptions``: the ``trainer:`` section of every stage config (identical keys).

Budgets are counted in optimiser steps (``max_steps``) or epochs (``max_epochs``); at least one
must be set; ``max_time`` (``"DD:HH:MM:SS"``) is an optional wall-clock cap on top (default: none).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

LOGGERS: tuple[str, ...] = ("csv", "none")
MODES: tuple[str, ...] = ("min", "max")
_TIME = re.compile(r"^\d+:\d{1,2}:\d{1,2}:\d{1,2}$")
#: Keys that change how long or how visibly a run trains, or which of its validated weights it
#: exports, not what it trains (a run may resume from a checkpoint written under other values
#: of these; a new ``monitor`` starts its choice of the best weights afresh). ``init_from``
#: only seeds a fresh run, so a resumed one ignores it. ``deterministic`` changes only the order
#: of a few floating-point sums, not what is learned.
BUDGET_KEYS: frozenset[str] = frozenset({"max_steps", "max_epochs", "max_time", "resume",
                                         "progress_bar", "logger", "log_every_n_steps",
                                         "val_every_n_steps", "monitor", "monitor_mode",
                                         "max_memory_gb", "init_from", "deterministic"})
#: ``module`` keys that only choose the working point on the validation events (what a stage
#: keeps), never what it learns: a run may resume under other values of these, and of the
#: ``inference`` section. The GNN's track-tuning keys (``fake_rate_target`` ... ``tune_points``)
#: now live in the tracks config (trkx.tracks.stage_config); they stay here so that training
#: state saved with them resumes.
WORKING_POINT_KEYS: frozenset[str] = frozenset({"target_efficiency", "max_edges_per_hit",
                                                "score_cut", "fake_rate_target", "tune_tracks",
                                                "quality_budget", "efficiency_count",
                                                "extend_window_xy",
                                                "extend_window_z", "extend_overlap_xy",
                                                "extend_overlap_z", "extend_pixel_xy",
                                                "extend_pixel_z", "second_fake_budget",
                                                "extend_rounds", "extend_weighted_z",
                                                "tune_points"})
#: ``module`` keys that choose the kernel of a sum (the GNN's CSR or scatter ``graph_ops``), not
#: the sum: a run may resume under another kernel (the last bits of its sums change, nothing
#: else), e.g. the one ``trkx run`` passes (trkx.pipeline.steps).
KERNEL_KEYS: frozenset[str] = frozenset({"graph_ops"})


@dataclass(frozen=True)
class TrainerOptions:
    """Training options shared by the embedding, filter and GNN stages.

    Args:
        max_steps: optimiser steps to train for (None: no step limit).
        max_epochs: epochs to train for (None: no epoch limit).
        max_time: wall-clock cap ``"DD:HH:MM:SS"`` (None: none).
        seed: seeds Python, NumPy and torch (``pl.seed_everything(seed, workers=True)``)
            before the module is built, so equal seeds give equal weights.
        accelerator: ``cpu``, ``gpu``, ``auto`` ... (Lightning).
        devices: device count or ``auto``.
        precision: Lightning precision, e.g. ``32-true``, ``bf16-mixed``.
        val_every_n_epochs: validate every this many epochs.
        val_every_n_steps: validate every this many optimiser steps instead, counted across
            epochs (None: by epochs): the learning curve of a run whose epoch is long, e.g.
            sampled minibatches (one epoch of 12 pile-up-200 events is ~6,000 steps).
        log_every_n_steps: logging period in steps.
        gradient_clip_val: clip the gradient norm to this value (None: no clipping).
        early_stopping_patience: stop after this many validations without improvement of
            ``monitor`` (None: no early stopping).
        monitor: validation metric that picks the best weights (and drives early stopping).
        monitor_mode: ``min`` or ``max``: which direction of ``monitor`` is better.
        progress_bar: show Lightning's progress bar.
        logger: ``csv`` (metrics.csv in the run folder) or ``none``.
        resume: continue from the run folder's ``last.ckpt`` when it was written by the same
            config (otherwise the run starts afresh).
        min_signal_efficiency: a trained stage whose validation keeps a smaller share of the
            signal edges than this is an error (nothing is exported).
        max_memory_gb: the resident memory (GB) past which the run saves ``last.ckpt`` and
            stops with a one-line error, to be resumed (None: 0.85 of the machine's memory).
        init_from: a model file of the same stage (``trkx train`` output) whose network
            weights start a fresh run instead of the seeded initialisation (fine-tuning, e.g.
            a GNN on a new graph); ignored when the run resumes from its ``last.ckpt``. The
            network's constructor must match the file's, except first layers that read more
            input columns (e.g. ``model.node_features`` 3 -> 9: the cluster shape besides
            the position), whose new columns start at weight 0 (trkx.training.fit).
        deterministic: train with ``torch.use_deterministic_algorithms`` (warn-only), so that
            a seeded run repeats bit for bit on one machine with one thread count: CPU
            ``index_put_(accumulate=True)`` (the backward of ``x[index]``, e.g. the
            embedding's pair loss) otherwise adds with atomics across threads, in whatever
            order they run. An op without a deterministic kernel warns and runs as is.
            False: torch's defaults (docs/design.md, "Reproducibility").
    """

    max_steps: int | None = None
    max_epochs: int | None = None
    max_time: str | None = None
    seed: int = 0
    accelerator: str = "auto"
    devices: int | str = 1
    precision: str | int = "32-true"
    val_every_n_epochs: int = 1
    val_every_n_steps: int | None = None
    log_every_n_steps: int = 10
    gradient_clip_val: float | None = None
    early_stopping_patience: int | None = None
    monitor: str = "val_loss"
    monitor_mode: str = "min"
    progress_bar: bool = True
    logger: str = "csv"
    resume: bool = True
    min_signal_efficiency: float = 0.05
    max_memory_gb: float | None = None
    init_from: str | None = None
    deterministic: bool = True

    def __post_init__(self) -> None:
        if self.max_steps is None and self.max_epochs is None:
            raise ValueError("set max_steps or max_epochs (the training budget)")
        for name in ("max_steps", "max_epochs", "early_stopping_patience", "val_every_n_steps"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name} must be >= 1 or null, got {value}")
        if self.val_every_n_epochs < 1 or self.log_every_n_steps < 1:
            raise ValueError("val_every_n_epochs and log_every_n_steps must be >= 1")
        if self.max_time is not None and not _TIME.match(str(self.max_time)):
            raise ValueError(f"max_time must be DD:HH:MM:SS, got {self.max_time!r}")
        if self.monitor_mode not in MODES:
            raise ValueError(f"monitor_mode must be min or max, got {self.monitor_mode!r}")
        if self.logger not in LOGGERS:
            raise ValueError(f"logger must be csv or none, got {self.logger!r}")
        if self.max_memory_gb is not None and self.max_memory_gb <= 0:
            raise ValueError(f"max_memory_gb must be > 0 or null, got {self.max_memory_gb}")
        if not 0.0 <= self.min_signal_efficiency <= 1.0:
            raise ValueError("min_signal_efficiency must lie in [0, 1]")

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)
