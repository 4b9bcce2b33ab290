"""``trkx package --recipe PIPELINE.yaml --workdir DIR --out DIR``: ship a trained pipeline.

Copies ``WORKDIR/checkpoints/{embedding,filter,gnn}.pt`` (each verified first) and the tuned
track builder (``tracks.yaml`` and its quality models), writes each stage's config as its
checkpoint stores it and a ``pipeline.yaml``,
``SHA256SUMS`` and the model card ``card.md`` (from the run's records and the benchmark JSON
files given with ``--physics`` and ``--inference``), with the learning curves
of every stage beside it (trkx.packaging). The folder is replaced whole."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(subparsers: argparse._SubParsersAction) -> None:
    from trkx.cli._help import description

    parser = subparsers.add_parser(
        "package", help="ship a trained pipeline as models of trkx, with its model card",
        description=description(__doc__))
    parser.add_argument("--recipe", type=Path, required=True, help="the pipeline YAML trained")
    parser.add_argument("--workdir", type=Path, required=True, help="its `trkx run` workdir")
    parser.add_argument("--out", type=Path, required=True, help="the shipped-model folder")
    for bench in ("physics", "inference"):
        parser.add_argument(f"--{bench}", type=Path, default=None, metavar="JSON",
                            help=f"benchmarks/{bench}.py JSON the card quotes")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from trkx.packaging.package import package

    benchmarks = {name: path for name, path in (("physics", args.physics),
                                                ("inference", args.inference)) if path}
    print(f"shipped models -> {package(args.recipe, args.workdir, args.out, benchmarks)}")
    return 0
