"""``trkx infer --config PIPELINE.yaml --checkpoints DIR --events DIR --out DIR [--set ...]``.

Runs the trained pipeline on TrackML-format events (cells optional unless the models were
trained with cell features, truth optional): one ``eventNNNNNNNNN-tracks.csv`` per event and
``timing.json`` (seconds per stage per event) in ``--out``; when the events carry truth,
``trkx evaluate`` runs on the result into ``--out/evaluate``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from trkx.config import ConfigError
from trkx.stage_tools import DeprecatedRename


def add_pipeline_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("whole-pipeline inference (no STAGE given)")
    group.add_argument("--config", help="pipeline YAML (e.g. configs/trackml.yaml)")
    group.add_argument("--checkpoints", type=Path,
                       help="folder with embedding.pt, filter.pt, gnn.pt (WORKDIR/checkpoints)")
    group.add_argument("--events", type=Path, help="folder of TrackML events")
    group.add_argument("--out", type=Path, help="folder for tracks, timing.json, evaluation")
    group.add_argument("--n-events", type=int, default=None, metavar="N",
                       help="only the first N events")
    group.add_argument("--nevents", dest="n_events", type=int, action=DeprecatedRename,
                       new="--n-events")
    group.add_argument("--set", dest="overrides", action="append", default=[],
                       metavar="KEY=VALUE", help="pipeline config override (repeatable)")


def run(args: argparse.Namespace) -> int:
    missing = [f"--{name}" for name in ("config", "checkpoints", "events", "out")
               if getattr(args, name) is None]
    if missing:
        raise ConfigError(f"trkx infer needs a STAGE, or {', '.join(missing)} for the whole "
                          "pipeline")
    from tqdm import tqdm

    from trkx.cli import main as trkx_main
    from trkx.cli._tracks_io import TRACKS_FILE, atomic_write, tracks_file_name
    from trkx.data.detector import load_detector
    from trkx.data.errors import EventFileNotFoundError
    from trkx.data.io import find_part_file
    from trkx.embedding.events import event_prefixes, event_record
    from trkx.pipeline.config import load_pipeline_config
    from trkx.pipeline.inference import TrainedPipeline
    from trkx.stage_tools import remove_stale
    from trkx.tracks.building import tracks_frame

    config = load_pipeline_config(args.config, args.overrides)
    stage_configs = {name: (config.stage_config_path(plan), plan.overrides)
                     for name, plan in config.stages.items()}
    stage_configs["tracks"] = (config.stage_config_path(config.tracks), config.tracks.overrides)
    pipeline = TrainedPipeline.load(args.checkpoints, stage_configs,
                                    config.inference.graph_ops, config.inference.precision)
    if not args.events.is_dir():
        raise FileNotFoundError(f"{args.events}: no such events folder")
    prefixes = event_prefixes(args.events)[: args.n_events]
    if not prefixes:
        raise FileNotFoundError(f"{args.events}: no TrackML events (event*-hits.csv[.gz])")
    detector = load_detector()
    timing: dict[str, dict[str, float]] = {}
    written = []
    with_truth = True
    for prefix in tqdm(prefixes, desc="trkx infer", unit="event"):
        start = time.perf_counter()
        record = event_record(prefix, detector, pipeline.use_cells, pipeline.signal_pt_min)
        load_seconds = time.perf_counter() - start
        _, labels, seconds = pipeline.run(record)
        event_id = int(record.event_id)
        table = tracks_frame(record.hit_id, labels, event_id)
        written.append(atomic_write(args.out / tracks_file_name(event_id),
                                    lambda tmp, t=table: t.to_csv(tmp, index=False)))
        timing[str(event_id)] = {"load": load_seconds, **seconds,
                                 "total": load_seconds + sum(seconds.values()),
                                 "n_hits": int(record.num_nodes)}
        try:
            find_part_file(prefix, "truth")
        except EventFileNotFoundError:
            with_truth = False
    remove_stale(args.out, written, TRACKS_FILE)
    stages = ["load", "embedding", "filter", "gnn", "tracks", "total"]
    mean = {s: sum(t[s] for t in timing.values()) / len(timing) for s in stages}
    text = json.dumps({"events": timing, "mean_seconds": mean}, indent=2)
    atomic_write(args.out / "timing.json", lambda tmp: tmp.write_text(text))
    print(f"{len(timing)} event(s) -> {args.out}; mean seconds per event: "
          + ", ".join(f"{s} {mean[s]:.2f}" for s in stages))
    if with_truth:
        return trkx_main(["evaluate", "--tracks", str(args.out), "--events", str(args.events),
                          "--out", str(args.out / "evaluate"),
                          "--config", str(stage_configs["tracks"][0]),
                          *(item for o in config.tracks.overrides for item in ("--set", o))])
    return 0
