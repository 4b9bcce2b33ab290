"""``trkx evaluate --tracks DIR --events DIR --out DIR``: tracking performance with plots.

For every ``eventNNNNNNNNN-tracks.csv`` in ``--tracks`` the truth comes from ``--events``: an
event record ``eventNNNNNNNNN*.pt`` (with per-hit truth), else the TrackML files
``eventNNNNNNNNN-{hits,particles,truth}.csv[.gz]``. Writes to ``--out``:

- ``metrics.json``: ``cuts``, ``overall`` (efficiency, fake_rate, duplicate_rate,
  trackml_score, counts, binomial errors; the fake rate split by kind, ``fake_rate_<kind>``:
  pieces of one signal or other particle, mixed, noise, trkx.tracks.evaluate.metrics), ``events``
  (the same per event), ``binned`` (the plotted rates with Clopper-Pearson 68% intervals)
  and ``edges`` (edge efficiency/purity per stage, when records with edges are given);
- ``particles.csv`` and ``tracks.csv``: the per-particle and per-track tables behind them;
- when the tracks folder holds ``eventNNNNNNNNN-parameters.csv`` (``trkx infer`` writes them):
  ``resolution`` in ``metrics.json`` (fitted pT and eta against the matched signal particles;
  phi, d0, z0 and charge of the prompt ones when ``--events`` are TrackML files with their
  particle table: trkx.tracks.evaluate.resolution), ``parameters.csv`` (fitted and true values per
  matched signal track) and the ``pt_resolution`` plot;
- PNG plots: efficiency vs pT, vs eta, vs the particle's hit count and vs production radius,
  fake rate vs eta, duplicate rate vs eta, track length.

Every efficiency is split into prompt particles (production radius <= 1 mm) and secondaries
(``efficiency_prompt``, ``efficiency_secondary`` in ``metrics.json``, both printed), when the
truth holds production vertices (TrackML particle files, records with ``production_radius``),
and by the vertex |z| along the beam (0-50, 50-100, 100-150, > 150 mm: ``efficiency_vz_*``, and
per origin; plot ``efficiency_vs_vertex_z``); the prompt particles from |z| < 100 mm by their
hit count (3, 4, 5+: ``efficiency_prompt_near_hits_*``). ``anchors`` in ``metrics.json`` (and a
printed line) counts as the published pipelines do (HEPTv2's evaluation,
trkx.tracks.evaluate.anchors):
the pixel part of the event, signal pT > 0.9 GeV, |eta| < 4, >= 3 pixel layers, the fake rate
over the candidates whose majority particle is signal.

Cuts and matching come from the ``metrics`` section of ``--config`` and ``--set``. Edge
efficiency/purity of the evaluated records count the edges with ``score >= --edge-cut`` (default:
the track builder's cut of ``--config``, the cut its tracks were built with); the records of
``--stage embedding=DIR`` and ``--stage filter=DIR`` hold only the edges their stage kept, so
every edge of them counts.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from trkx.stage_names import LEARNED_STAGES

STAGE_NAMES = LEARNED_STAGES


#: What `trkx evaluate --help` says (every field of metrics.json: this module's docstring).
HELP = """\
The tracks of --tracks (eventNNNNNNNNN-tracks.csv) against the truth of --events (event records
*.pt, or TrackML files with truth), written to --out: metrics.json (efficiency, prompt and
secondary, by vertex |z| and hit count; fake rate by kind; duplicates; TrackML score; edge
figures per stage with --stage), particles.csv, tracks.csv and plots; with trkx infer's
parameters files, the fitted parameters' resolution too. Two counts are printed: trkx's
(signal pT >= 1 GeV, >= 3 hits on >= 3 layers: the metrics section of --config, --set) and the
published pipelines' (HEPTv2's definitions, the pixel part). Each field: docs/tracks.md and
the module trkx.cli.evaluate."""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "evaluate", help="efficiency, fake/duplicate rate, TrackML score and plots",
        description=HELP, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--tracks", type=Path, required=True,
                        help="folder of eventNNNNNNNNN-tracks.csv files")
    parser.add_argument("--events", type=Path, required=True,
                        help="folder of event records (*.pt) or TrackML events with truth")
    parser.add_argument("--out", type=Path, required=True, help="output folder")
    parser.add_argument("--config", default=None,
                        help="tracks config: the tuned tracks.yaml of the models that made "
                             "the tracks (its metrics section, its builder's cut)")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="KEY=VALUE", help="override, e.g. metrics.matching=atlas")
    parser.add_argument("--edge-cut", type=float, default=None,
                        help="score cut for edge efficiency/purity (default: the builder's "
                             "cut of --config)")
    parser.add_argument("--stage", action="append", default=[], metavar="NAME=DIR",
                        help="also report edge efficiency/purity of the records in DIR "
                             f"(NAME: {', '.join(STAGE_NAMES)})")
    parser.set_defaults(func=run)


def parse_stages(items: list[str]) -> list[tuple[str, Path]]:
    """``NAME=DIR`` arguments of ``--stage``, checked (known NAME, existing DIR)."""
    from trkx.config import ConfigError

    stages = []
    for item in items:
        name, _, folder = item.partition("=")
        if name not in STAGE_NAMES or not folder:
            raise ConfigError(f"--stage {item!r}: expected NAME=DIR with NAME one of "
                              f"{', '.join(STAGE_NAMES)}")
        if not Path(folder).is_dir():
            raise FileNotFoundError(f"--stage {item!r}: no such folder {folder}")
        stages.append((name, Path(folder)))
    return stages


def check_folders(args: argparse.Namespace) -> list[tuple[str, Path]]:
    """--tracks, --events and every --stage DIR exist (before the heavy imports); the
    ``--stage`` pairs."""
    from trkx.data.folders import require_folder

    require_folder(args.tracks, "--tracks", "folder of track files")
    require_folder(args.events, "--events", "events folder")
    return parse_stages(args.stage)


def run(args: argparse.Namespace) -> int:
    stages = check_folders(args)
    from trkx.tracks.evaluate.evaluation import evaluate_tracks, evaluation_settings
    from trkx.tracks.evaluate.report import write_evaluation
    from trkx.tracks.evaluate.summary_text import evaluation_text

    cuts, builder_cut = evaluation_settings(args.config, args.overrides)
    start = time.perf_counter()
    edge_cut = args.edge_cut if args.edge_cut is not None else builder_cut
    evaluation = evaluate_tracks(args.tracks, args.events, cuts, edge_cut, stages)
    written = write_evaluation(evaluation, args.out)
    print(evaluation_text(evaluation.report))
    print(f"wrote {args.out / 'metrics.json'} and "
          f"{sum(p.suffix == '.png' for p in written)} plots in "
          f"{time.perf_counter() - start:.2f} s")
    return 0
