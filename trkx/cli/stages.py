"""``trkx train STAGE`` and ``trkx infer STAGE``: dispatch to the pipeline stages.

Each stage package ``trkx.<stage>`` provides a module ``trkx.<stage>.cli`` with

    add_train_arguments(parser), train(args) -> int,
    add_infer_arguments(parser), infer(args) -> int,

importing its heavy dependencies inside ``train``/``infer``. Stages whose ``cli`` module does
not exist yet are simply not offered. ``trkx infer`` without a STAGE runs the whole trained
pipeline (:mod:`trkx.cli.pipeline_infer`).
"""

from __future__ import annotations

import argparse
import importlib

STAGES: tuple[str, ...] = ("embedding", "filter", "gnn")


def _stage_modules() -> dict[str, object]:
    modules = {}
    for stage in STAGES:
        try:
            modules[stage] = importlib.import_module(f"trkx.{stage}.cli")
        except ModuleNotFoundError as exc:
            if exc.name != f"trkx.{stage}.cli":
                raise
    return modules


def register(subparsers: argparse._SubParsersAction) -> None:
    modules = _stage_modules()
    for verb in ("train", "infer"):
        parser = subparsers.add_parser(
            verb, help=f"{verb} one pipeline stage ({', '.join(modules) or 'none yet'})",
            description=f"{verb.capitalize()} one stage of the pipeline.")
        stage_parsers = parser.add_subparsers(dest="stage", metavar="STAGE",
                                              required=verb == "train")
        if verb == "infer":
            from trkx.cli import pipeline_infer

            pipeline_infer.add_pipeline_arguments(parser)
            parser.set_defaults(func=pipeline_infer.run)
        for stage, module in modules.items():
            stage_parser = stage_parsers.add_parser(stage, help=f"{verb} the {stage} stage")
            getattr(module, f"add_{verb}_arguments")(stage_parser)
            stage_parser.set_defaults(func=getattr(module, verb))
