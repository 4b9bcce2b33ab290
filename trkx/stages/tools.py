"""The one command shape of the learned stages, shared by embedding, filter and gnn:

    trkx train STAGE --config FILE [--set KEY=VALUE ...] [--checkpoint FILE] [--no-resume]
    trkx infer STAGE [--config FILE] --checkpoint FILE --events DIR --out DIR
                     [--n-events N] [--set KEY=VALUE ...]

Each stage module ``trkx.<stage>.cli`` implements :class:`trkx.stages.commands.StageCommands`
(``NAME``, ``SECTIONS``, ``DEFAULT_CONFIG``, ``check_config``, ``count_events``, ``train``,
``infer``); this module parses the arguments,
builds the config (file, then ``--set``), checks every key before any work and writes outputs.
``checkpoint`` is the config key of the model file for all three stages (``--checkpoint``
overrides it); ``trkx infer STAGE`` without ``--config`` uses the config stored in the checkpoint.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trkx.config import (
    ConfigError,
    apply_overrides,
    check_sections,
    load_config,
    naming_overrides,
)
from trkx.data.listing import output_path, remove_stale
from trkx.stages.commands import StageCommands

if TYPE_CHECKING:
    import pytorch_lightning as pl

    from trkx.data.record_type import Record
    from trkx.training.data import EventSlice, StageData
    from trkx.training.fit import FitResult



def add_set_argument(parser: argparse.ArgumentParser, example: str) -> None:
    """``--set KEY=VALUE`` (repeatable)."""
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="KEY=VALUE", help=f"config override (repeatable), e.g. {example}")


def overrides_of(args: argparse.Namespace) -> list[str]:
    """The ``--set`` values, in order."""
    return list(args.overrides or [])


def add_train_arguments(parser: argparse.ArgumentParser, default: str) -> None:
    parser.add_argument("--config", default=default, metavar="FILE",
                        help=f"stage YAML (default: {default})")
    add_set_argument(parser, "trainer.max_steps=500")
    parser.add_argument("--checkpoint", default=None, metavar="FILE",
                        help="where to write the trained model (default: the config's "
                             "'checkpoint' key); it trains in FILE's folder, NAME.run/")
    parser.add_argument("--resume", action=argparse.BooleanOptionalAction, default=None,
                        help="continue an interrupted run from its last.ckpt (default: "
                             "trainer.resume)")


def add_infer_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", default=None, metavar="FILE",
                        help="stage YAML (default: the config stored in the checkpoint)")
    parser.add_argument("--checkpoint", default=None, metavar="FILE",
                        help="trained model (default: the config's 'checkpoint' key)")
    parser.add_argument("--events", type=Path, default=None, metavar="DIR",
                        help="input folder of events (required)")
    parser.add_argument("--out", type=Path, default=None, metavar="DIR",
                        help="output folder of records (required)")
    parser.add_argument("--n-events", type=int, default=None, metavar="N",
                        help="only the first N events")
    add_set_argument(parser, "inference.chunk_size=100000")


def stage_config(path: str | Path, overrides: Iterable[str], stage: StageCommands,
                 check_folders: bool = False) -> dict[str, Any]:
    """The config file with overrides applied, sections and keys checked; ``check_folders``:
    first that data.train_dir and data.val_dir exist (before the stage's checks import torch
    and Lightning, so a mistyped folder fails at once)."""
    label = str(path)
    config = apply_overrides(load_config(path), overrides)
    if check_folders:
        check_data_folders(config)
    check_sections(config, stage.SECTIONS, label)
    stage.check_config(config, label)
    return config


def check_data_folders(config: dict[str, Any]) -> None:
    """data.train_dir and data.val_dir, where set, are existing folders."""
    from trkx.data.folders import require_folder

    data = config.get("data")
    if not isinstance(data, dict):
        return                                  # the section checks name what is wrong
    for key in ("train_dir", "val_dir"):
        folder = data.get(key)
        if isinstance(folder, str) and folder:
            require_folder(folder, f"data.{key}")


def run_train(stage: StageCommands, args: argparse.Namespace) -> int:
    given = overrides_of(args)
    overrides = list(given)
    if args.checkpoint:
        overrides.append(f"checkpoint={args.checkpoint}")
    if args.resume is not None:
        overrides.append(f"trainer.resume={str(args.resume).lower()}")
    with naming_overrides(given, str(args.config)):     # a bad --set value names the --set
        config = stage_config(args.config, overrides, stage, check_folders=True)
    checkpoint = config.get("checkpoint")
    if not checkpoint:
        raise ConfigError(f"{args.config}: no 'checkpoint' key and no --checkpoint given")
    result = stage.train(config, str(args.config), Path(str(checkpoint)))
    if result is None or isinstance(result, int):  # the torchrun entry reports for itself
        return int(result or 0)
    if os.environ.get("RANK", "0") != "0":          # torchrun: rank 0 speaks for the job
        return 0
    print(f"{stage.NAME}: trained to step {result.global_step} -> {result.checkpoint}")
    for key, value in sorted({**result.metrics, **result.working_point}.items()):
        print(f"  {key} = {value:.4f}")
    return 0


def check_infer_folders(events: Path, out: Path) -> None:
    """--events exists and --out is another folder (before the checkpoint and the config are
    read: both import torch)."""
    from trkx.data.folders import require_folder

    require_folder(events, "--events", "events folder")
    if out.resolve() == events.resolve():
        raise ConfigError(f"{out}: the output folder must differ from --events")


def run_infer(stage: StageCommands, args: argparse.Namespace) -> int:
    from trkx.files.checkpoint import load_checkpoint

    missing = [f"--{name}" for name in ("events", "out") if getattr(args, name) is None]
    if missing:
        raise ConfigError(f"trkx infer {stage.NAME}: {' and '.join(missing)} required")
    check_infer_folders(args.events, args.out)
    overrides = overrides_of(args)
    checkpoint = args.checkpoint
    if args.config:
        with naming_overrides(overrides, str(args.config)):
            config = stage_config(args.config, overrides, stage)
        checkpoint = checkpoint or config.get("checkpoint")
        label = str(args.config)
    if not checkpoint:
        raise ConfigError(f"trkx infer {stage.NAME}: give --checkpoint FILE (or a --config "
                          "with a 'checkpoint' key)")
    if not args.config:
        label = f"{checkpoint} (stored config)"
        stored = load_checkpoint(checkpoint, stage.NAME).config
        config = apply_overrides(stored, overrides)
        with naming_overrides(overrides, label):
            check_sections(config, stage.SECTIONS, label)
            stage.check_config(config, label)
    return int(stage.infer(config, label, Path(str(checkpoint)), args.events, args.out,
                           args.n_events) or 0)


def write_records(records: Iterable[Record], out: Path, transform: Callable[[Record], Record],
                  describe: Callable[[Record, Record], str],
                  name: Callable[[Record], str] | None = None) -> list[Path]:
    """``transform`` every record, save it as ``out/eventNNNNNNNNN.pt`` (or ``out/name(r)``),
    print ``describe``, then remove the outputs of earlier runs."""
    from trkx.data.record import save_record

    written = []
    for record in records:
        result = transform(record)
        target = (Path(out) / name(record) if name is not None
                  else output_path(int(record.event_id), out))
        path = save_record(result, target)
        written.append(path)
        print(f"{path}: {describe(record, result)}")
    remove_stale(out, written)
    return written


def load_split(data: StageData, count_events: Callable[[str], int], label: str,
               load: Callable[[str, int, int], list[Record]],
               check: Callable[[list[Record], str, str], None] | None = None,
               precheck: Callable[[EventSlice, str], None] | None = None,
               ) -> tuple[list[Record], list[Record] | None]:
    """Train and validation records of a stage's ``data`` section (``split_events``), read
    with ``load(folder, count, first)`` and checked with ``check(records, folder, key)``;
    ``precheck(slice, key)`` sees both slices before anything is read (e.g. that the events
    have truth files), so a wrong validation folder fails before the training events load."""
    from trkx.training.data import split_events

    slices = split_events(data, count_events, label)
    keys = ("data.train_dir", "data.val_dir" if data.val_dir else "data.train_dir")
    for part, key in zip(slices, keys):
        if part and precheck is not None:
            precheck(part, key)
    loaded: list[list[Record] | None] = []
    for part, key in zip(slices, keys):
        records = load(part.folder, part.count, part.first) if part else None
        if records is not None and check is not None:
            check(records, part.folder, key)
        loaded.append(records)
    return loaded[0], loaded[1]


def fit_on_records(name: str, build_module: Callable[[], pl.LightningModule],
                   network_config: dict[str, Any], train: list[Record], val: list[Record] | None,
                   **fit_options: Any) -> FitResult:
    """:func:`trkx.training.fit_stage` over in-memory event records, one event per step
    (shuffled), the stage network at ``module.network`` built from ``network_config`` (the
    config's ``model`` section, stored in the checkpoint as its constructor); ``fit_options``:
    options, checkpoint, config, efficiency_key, default_working_point."""
    from torch.utils.data import DataLoader

    from trkx.training import fit_stage

    return fit_stage(
        name, build_module, network=lambda m: m.network, constructor=lambda m: network_config,
        train_loader=DataLoader(train, batch_size=None, shuffle=True),
        val_loader=DataLoader(val, batch_size=None) if val else None, **fit_options)
