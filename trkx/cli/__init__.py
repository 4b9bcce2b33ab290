"""The ``trkx`` command line: one entry point, one module per subcommand.

Each subcommand module exposes ``register(subparsers)``, which adds its parser and sets
``func(args) -> int`` as the handler. Errors in user input (:class:`TrackMLFormatError`,
missing files, bad configs) are printed as one clear line and exit with status 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from trkx.cli import demo, info, score
from trkx.data.errors import TrackMLFormatError

COMMANDS = (info, score, demo)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="trkx",
        description="GNN track reconstruction for TrackML-format events (Exa.TrkX recipe).",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in COMMANDS:
        command.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (TrackMLFormatError, FileNotFoundError, KeyError, ValueError) as exc:
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"trkx {args.command}: error: {message}", file=sys.stderr)
        return 2
