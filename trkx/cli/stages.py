"""``trkx train STAGE`` and ``trkx infer STAGE``: one command shape for every learned stage.

Each stage package ``trkx.<stage>`` provides ``trkx.<stage>.cli``, which implements
:class:`trkx.stages.commands.StageCommands`; the arguments are the same for all of them.
``trkx infer`` without a STAGE runs the whole trained pipeline (:mod:`trkx.cli.pipeline_infer`).
"""

from __future__ import annotations

import argparse
import functools
import importlib
from typing import cast

from trkx.stage_names import LEARNED_STAGES
from trkx.stages.commands import StageCommands

STAGES = LEARNED_STAGES


def stage_module(stage: str) -> StageCommands:
    """The commands of ``stage`` (its module ``trkx.<stage>.cli``)."""
    return cast(StageCommands, importlib.import_module(f"trkx.{stage}.cli"))


def register(subparsers: argparse._SubParsersAction) -> None:
    from trkx.stages import tools as stage_tools

    helps = {"train": f"train one pipeline stage ({', '.join(STAGES)})",
             "infer": "tracks of TrackML events with a trained pipeline (or one STAGE's "
                      "inference)"}
    usages = {"train": None,
              "infer": "%(prog)s --events DIR --out DIR [--config CONFIG --checkpoints DIR]\n"
                       "                  [--n-events N] [--device {auto,cpu,cuda}] "
                       "[--workers N]\n                  [--set KEY=VALUE] [--graphs DIR] "
                       "[--[no-]evaluate]\n"
                       "       %(prog)s STAGE --checkpoint FILE --events DIR --out DIR ...\n"
                       "                  (STAGE: " + ", ".join(STAGES) + "; "
                       "%(prog)s STAGE --help)"}
    for verb in ("train", "infer"):
        parser = subparsers.add_parser(
            verb, help=helps[verb], usage=usages[verb],
            description=("Train one stage of the pipeline: trkx train STAGE --config FILE "
                         "[--set KEY=VALUE ...]" if verb == "train" else
                         "Tracks of TrackML events with a trained pipeline: trkx infer "
                         "--events DIR --out DIR runs the pile-up-200 models shipped with trkx; "
                         "--config PIPELINE.yaml --checkpoints DIR runs models you trained "
                         "(the options below); or one stage's inference, event records in "
                         "and out: trkx infer STAGE --checkpoint FILE --events DIR --out DIR "
                         "(trkx infer STAGE --help)."))
        stage_parsers = parser.add_subparsers(dest="stage", metavar="STAGE",
                                              required=verb == "train")
        if verb == "infer":
            from trkx.cli import pipeline_infer

            pipeline_infer.add_pipeline_arguments(parser)
            parser.set_defaults(func=pipeline_infer.run)
        for stage in STAGES:
            module = stage_module(stage)
            stage_parser = stage_parsers.add_parser(stage, help=f"{verb} the {stage} stage")
            if verb == "train":
                stage_tools.add_train_arguments(stage_parser, module.DEFAULT_CONFIG)
                stage_parser.set_defaults(func=functools.partial(stage_tools.run_train, module))
            else:
                stage_tools.add_infer_arguments(stage_parser)
                stage_parser.set_defaults(func=functools.partial(stage_tools.run_infer, module))
