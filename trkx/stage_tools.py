"""What every stage CLI shares: its config, its Lightning Trainer, its output folder.

Heavy imports (torch, Lightning) happen inside the functions so ``trkx --help`` stays fast.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from trkx.config import apply_overrides, check_sections, load_config


def add_config_arguments(parser: argparse.ArgumentParser, default_config: str) -> None:
    parser.add_argument("--config", default=default_config,
                        help=f"stage YAML config (default: {default_config})")
    parser.add_argument("overrides", nargs="*", metavar="KEY=VALUE",
                        help="config overrides, e.g. model.hidden=64 trainer.max_epochs=2")


def stage_config(args: argparse.Namespace, sections: Iterable[str]) -> dict[str, Any]:
    """The config file with the command-line overrides applied, sections checked."""
    config = apply_overrides(load_config(args.config), args.overrides)
    check_sections(config, sections, str(args.config))
    return config


def checkpoint_path(args: argparse.Namespace, config: dict[str, Any]) -> str:
    """``--checkpoint``, else the config's ``checkpoint`` key (a clear error when neither)."""
    from trkx.config import ConfigError

    path = args.checkpoint or config.get("checkpoint")
    if not path:
        raise ConfigError(f"{args.config}: no 'checkpoint' key and no --checkpoint given")
    return str(path)


def make_trainer(options: dict[str, Any], label: str):
    """A Lightning Trainer from the config's ``trainer`` section (one-to-one kwargs)."""
    import pytorch_lightning as pl

    from trkx.config import instantiate

    options = dict(options)
    options.setdefault("logger", False)
    options.setdefault("enable_checkpointing", False)
    options.setdefault("enable_model_summary", False)
    return instantiate(pl.Trainer, options, f"{label}: trainer")


def output_path(event_id: int, out_dir: str | Path) -> Path:
    """Where the record of one event goes."""
    return Path(out_dir) / f"event{int(event_id):09d}.pt"
