"""The ``trkx`` command line: one entry point, one module per subcommand.

Every module of this package that defines ``register(subparsers)`` is a subcommand: it adds its
parser and sets ``func(args) -> int`` as the handler. Modules import heavy dependencies (torch,
Lightning, FAISS) inside their handlers, so ``trkx --help`` and ``trkx info`` stay fast. Errors in
user input (bad files, bad configs) print one clear line and exit with status 2.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Sequence

from trkx.config import ConfigError
from trkx.data.errors import TrackMLFormatError
from trkx.pipeline.runner import StepFailed


def command_modules() -> list:
    """The subcommand modules of this package, in name order."""
    modules = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        if hasattr(module, "register"):
            modules.append(module)
    return modules


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="trkx",
        description="GNN track reconstruction for TrackML-format events (Exa.TrkX recipe).",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in command_modules():
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (TrackMLFormatError, ConfigError, FileNotFoundError, StepFailed) as exc:
        print(f"trkx {args.command}: error: {exc}", file=sys.stderr)
        return 2
