"""``trkx demo``: the shipped models on the real pile-up-200 event 21001, as ``make demo`` runs.

``trkx demo`` is ``trkx infer --events $TRKX_DATA/real_pixel_truth --out runs/demo --plots``:
the cells set (the event has cells files) builds the tracks of the full real event and evaluates
them on its pixel truth (tracks in ``runs/demo``, the evaluation with its plots in
``runs/demo/evaluate``, which the notebook reads). ``--events`` and ``--out`` take other folders.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

#: The real event with truth, under $TRKX_DATA (shared/data/trackml).
REAL_EVENT_FOLDER = "real_pixel_truth"
DEFAULT_OUT = "runs/demo"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "demo", help="the shipped models on the real pile-up-200 event 21001 (make demo)",
        description="The shipped models on the full real pile-up-200 event 21001 with its "
                    "pixel truth: `trkx infer --events $TRKX_DATA/real_pixel_truth --out "
                    "runs/demo --plots` (tracks, timing.json, the evaluation and its plots in "
                    "runs/demo/evaluate). "
                    "About 10 s per event on 2 CPU cores once the models are loaded.")
    parser.add_argument("--events", type=Path, default=None,
                        help=f"folder of TrackML events (default: $TRKX_DATA/"
                             f"{REAL_EVENT_FOLDER})")
    parser.add_argument("--out", type=Path, default=Path(DEFAULT_OUT),
                        help=f"folder for the tracks and the evaluation (default: "
                             f"{DEFAULT_OUT})")
    parser.set_defaults(func=run)


def default_events() -> Path:
    """``$TRKX_DATA/real_pixel_truth``; a FileNotFoundError naming TRKX_DATA when unset."""
    data = os.environ.get("TRKX_DATA")
    if not data:
        raise FileNotFoundError(f"no events given: pass --events DIR or set TRKX_DATA to the "
                                f"folder holding {REAL_EVENT_FOLDER}/")
    return Path(data) / REAL_EVENT_FOLDER


def run(args: argparse.Namespace) -> int:
    from trkx.cli import build_parser

    events = args.events if args.events is not None else default_events()
    infer = build_parser().parse_args(["infer", "--events", str(events), "--out",
                                       str(args.out), "--plots"])
    return int(infer.func(infer) or 0)
