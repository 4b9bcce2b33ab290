"""``trkx tune-tracks --config tracks.yaml --events DIR --out DIR``: the builder's working point.

Reads the GNN-scored validation events in ``--events`` (event records with ``scores`` and
truth, as ``trkx infer gnn`` writes them), builds their tracks at every candidate cut, length
and quality cut, and chooses the point of best efficiency at the fake rate of the config's
``tune`` section (trkx.tracks.tune.tune_tracks). Writes the tuned tracks config
``--out/tracks.yaml``: every builder key with the value it runs with, the ``metrics`` and
``tune`` sections of ``--config``, the validation figures, and each quality model in a JSON file
beside it. ``trkx run`` runs this after the GNN's training (step ``tune-tracks``), into the
checkpoint folder, where ``trkx infer`` finds it; ``trkx package`` ships it.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path


def register(subparsers: argparse._SubParsersAction) -> None:
    from trkx.cli._help import description

    parser = subparsers.add_parser(
        "tune-tracks", help="choose the track builder's working point on validation events",
        description=description(__doc__))
    parser.add_argument("--config", required=True,
                        help="tracks config with a tune section (configs/tracks.yaml)")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="KEY=VALUE", help="override, e.g. tune.fake_rate_target=0.01")
    parser.add_argument("--events", type=Path, required=True,
                        help="folder of GNN-scored validation records (*.pt) with truth")
    parser.add_argument("--out", type=Path, required=True,
                        help="folder for the tuned tracks.yaml and its quality models")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from trkx.data.folders import require_folder

    require_folder(args.events, "--events", "folder of scored validation records")
    from trkx.config import instantiate, naming_overrides, section
    from trkx.data.listing import record_paths
    from trkx.data.record import load_record
    from trkx.files.errors import TrackMLFormatError
    from trkx.tracks.builder.building import TrackBuilder
    from trkx.tracks.evaluate.event_truth import has_truth
    from trkx.tracks.evaluate.metrics import MetricCuts
    from trkx.tracks.stage_config import builder_values, tracks_config, write_tuned_config
    from trkx.tracks.tune.tune_tracks import TrackTuning, tune_tracks

    label = args.config
    with naming_overrides(args.overrides, label):   # a bad --set names it
        config = tracks_config(args.config, args.overrides)
        base = instantiate(TrackBuilder, builder_values(config, Path(args.config).parent, label,
                                                        untuned=True), f"{label}: builder")
        tuning = instantiate(TrackTuning, section(config, "tune", label), f"{label}: tune")
        cuts = instantiate(MetricCuts, section(config, "metrics", label), f"{label}: metrics")
    records = []
    for path in record_paths(args.events):
        record = load_record(path)
        if getattr(record, "scores", None) is None or not has_truth(record):
            raise TrackMLFormatError(f"{path}: the tuner needs GNN scores and truth (a record "
                                     "of `trkx infer gnn` on a validation event)")
        records.append(record)
    start = time.perf_counter()
    builder, figures = tune_tracks(records, base, tuning, cuts)
    written = write_tuned_config(args.out, builder, config, figures,
                                 f"`trkx tune-tracks --config {args.config}` on {len(records)} "
                                 f"event(s) of {args.events}")
    print(f"{len(records)} validation event(s): walk cut {builder.edge_cut}, min_length "
          f"{builder.min_length}/{builder.min_length_forward}, track efficiency "
          f"{figures['val_track_efficiency']:.4f} at fake rate {figures['val_fake_rate']:.4f} "
          f"-> {written} ({time.perf_counter() - start:.1f} s)")
    return 0
