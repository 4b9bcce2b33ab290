"""``trkx build-tracks --events DIR --out DIR``: tracks from scored event records.

Reads every event record (``*.pt``, written by the edge-classifier stage, with ``edge_index``,
``scores``, ``hit_id``) in ``--events``, builds tracks with :class:`TrackBuilder` (the
``builder`` section of ``--config``, a tuned tracks config as ``trkx tune-tracks`` writes it,
then ``--set builder.KEY=VALUE``), and writes one TrackML
submission file ``eventNNNNNNNNN-tracks.csv`` (``event_id,hit_id,track_id``) per event, each
atomically, and beside it ``eventNNNNNNNNN-parameters.csv`` (each track's helix fit and quality:
trkx.tracks.builder.parameters) when the record has hit positions and layers.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path


def register(subparsers: argparse._SubParsersAction) -> None:
    from trkx.cli._help import description

    parser = subparsers.add_parser(
        "build-tracks", help="build tracks from scored event records",
        description=description(__doc__))
    parser.add_argument("--events", type=Path, required=True,
                        help="folder of event records (*.pt) with edge_index and scores")
    parser.add_argument("--out", type=Path, required=True, help="folder for the track files")
    parser.add_argument("--config", default=None,
                        help="tuned tracks config (`trkx tune-tracks`, or a shipped set's "
                             "tracks.yaml)")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="KEY=VALUE", help="override, e.g. builder.walk_cut=0.5")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from trkx.data.folders import require_folder

    require_folder(args.events, "--events", "folder of event records")   # before torch
    from tqdm import tqdm

    from trkx.config import naming_overrides
    from trkx.data.listing import record_event_id, record_paths, remove_stale
    from trkx.data.record import load_record
    from trkx.files.errors import TrackMLFormatError
    from trkx.tracks.builder.parameters import (
        PARAMETERS_FILE,
        parameters_file_name,
        track_parameters,
    )
    from trkx.tracks.builder.track_labels import tracks_frame
    from trkx.tracks.files import (
        TRACKS_FILE,
        atomic_write,
        tracks_file_name,
    )
    from trkx.tracks.stage_config import track_builder

    with naming_overrides(args.overrides, args.config or "--set"):   # a bad --set names it
        builder = track_builder(args.config, args.overrides)
    records = record_paths(args.events, allow_empty=True)
    if not records:
        raise FileNotFoundError(f"{args.events}: no event records (*.pt)")
    start = time.perf_counter()
    n_tracks = 0
    written = []
    for path in tqdm(records, desc="build tracks", unit="event"):
        record = load_record(path)
        stored = getattr(record, "event_id", None)
        event_id = (int(stored) if stored is not None and int(stored) >= 0
                    else record_event_id(path))
        if event_id < 0:
            raise TrackMLFormatError(f"{path}: no event id in the record or the file name")
        try:
            labels = builder.build(record)
        except ValueError as exc:
            raise TrackMLFormatError(f"{path}: {exc}") from exc
        table = tracks_frame(record.hit_id, labels, event_id)
        written.append(atomic_write(args.out / tracks_file_name(event_id),
                                    lambda tmp, t=table: t.to_csv(tmp, index=False)))
        if all(getattr(record, key, None) is not None for key in ("pos", "volume_id",
                                                                  "layer_id")):
            fitted = track_parameters(record, labels, builder)
            written.append(atomic_write(args.out / parameters_file_name(event_id),
                                        lambda tmp, t=fitted: t.to_csv(tmp, index=False)))
        n_tracks += int(labels.max()) + 1 if len(labels) else 0
    remove_stale(args.out, written, TRACKS_FILE)
    remove_stale(args.out, written, PARAMETERS_FILE)
    print(f"{len(records)} event(s), {n_tracks:,d} tracks ({builder.method}) written to "
          f"{args.out} in {time.perf_counter() - start:.2f} s")
    return 0
