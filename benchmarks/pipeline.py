"""End-to-end benchmark of a trained pipeline: time per stage per event, and tracking physics.

On simulated events with truth (simulated here at ``--pileup``, default 200, unless ``--events``
names a folder) it reports per-stage seconds per event, pT > 1 GeV double-majority efficiency,
fake and duplicate rates and the TrackML score; on the real full-event hit files of
``$TRKX_DATA/kaggle_hits`` (no truth) it reports time, graph sizes and the track-length
distribution beside the same figures for the simulated events. Targets (issue 9): <= 5 s per
MU=200 event end to end, efficiency >= 97%, fake and duplicate rates <= 2%.

    python benchmarks/pipeline.py --config configs/trackml.yaml \
        --checkpoints runs/trackml/checkpoints [--events DIR | --n-events 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np


def stage_configs(config):
    configs = {name: (config.stage_config_path(plan), plan.overrides)
               for name, plan in config.stages.items()}
    configs["tracks"] = (config.stage_config_path(config.tracks), config.tracks.overrides)
    return configs


def run_events(pipeline, prefixes, with_truth: bool) -> dict:
    """Per-event timings, graph sizes, track lengths and (with truth) evaluations."""
    from trkx.data.detector import load_detector
    from trkx.embedding.events import event_record
    from trkx.tracks.building import tracks_frame
    from trkx.tracks.event_truth import truth_from_record
    from trkx.tracks.metrics import MetricCuts, evaluate_event

    detector = load_detector()
    rows, evaluations, lengths = [], [], []
    for prefix in prefixes:
        start = time.perf_counter()
        record = event_record(prefix, detector, pipeline.use_cells, 1.0)
        load = time.perf_counter() - start
        graphs, labels, seconds = pipeline.run(record)
        rows.append({"event": Path(prefix).name, "n_hits": int(record.num_nodes), "load": load,
                     **seconds, "total": load + sum(seconds.values()),
                     **{f"edges_{k}": int(g.edge_index.shape[1]) for k, g in graphs.items()}})
        lengths.append(np.bincount(np.bincount(labels)))
        if with_truth:
            submission = tracks_frame(record.hit_id, labels, int(record.event_id))
            evaluations.append(evaluate_event(truth_from_record(record), submission,
                                              MetricCuts()))
    width = max(len(x) for x in lengths)
    histogram = sum(np.pad(x, (0, width - len(x))) for x in lengths)
    return {"rows": rows, "evaluations": evaluations,
            "track_length_histogram": histogram.tolist()}


def mean_seconds(rows: list[dict]) -> dict[str, float]:
    keys = ["load", "embedding", "filter", "gnn", "tracks", "total"]
    return {k: float(np.mean([r[k] for r in rows])) for k in keys}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="configs/trackml.yaml")
    parser.add_argument("--checkpoints", type=Path, required=True)
    parser.add_argument("--events", type=Path, default=None,
                        help="simulated events with truth (default: simulate --n-events)")
    parser.add_argument("--n-events", type=int, default=3)
    parser.add_argument("--pileup", type=float, default=200.0)
    parser.add_argument("--real", type=int, default=2, help="real kaggle_hits files to time")
    parser.add_argument("--data", type=Path, default=Path(os.environ.get(
        "TRKX_DATA", Path(__file__).resolve().parents[2] / "shared" / "data" / "trackml")))
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()

    from trkx.cli import main as trkx_main
    from trkx.embedding.events import event_prefixes
    from trkx.pipeline.config import load_pipeline_config
    from trkx.pipeline.inference import TrainedPipeline
    from trkx.tracks.metrics import overall_summary

    config = load_pipeline_config(args.config)
    pipeline = TrainedPipeline.load(args.checkpoints, stage_configs(config),
                                    config.inference.graph_ops, config.inference.precision)
    with tempfile.TemporaryDirectory() as scratch:
        events = args.events
        if events is None:
            events = Path(scratch) / "sim"
            trkx_main(["simulate", "--out", str(events), "--events", str(args.n_events),
                       "--seed", "77", "--pileup", str(args.pileup),
                       "--first-event-id", "900000"])
        simulated = run_events(pipeline, event_prefixes(events), with_truth=True)
    overall = overall_summary(simulated["evaluations"])
    real_dir = args.data / "kaggle_hits"
    real = None
    if pipeline.use_cells:
        print("real kaggle_hits files have no cells and these models use cell features: real "
              "events skipped (train with data.use_cells=false and in_features=3 to time them)")
    elif real_dir.is_dir() and args.real > 0:
        real = run_events(pipeline, event_prefixes(real_dir)[: args.real], with_truth=False)

    figures = {
        "seconds_per_event_mu200": mean_seconds(simulated["rows"])["total"],
        "seconds_per_stage": mean_seconds(simulated["rows"]),
        "efficiency_pt1": overall["efficiency"], "fake_rate": overall["fake_rate"],
        "duplicate_rate": overall["duplicate_rate"], "trackml_score": overall["trackml_score"],
        "simulated": {k: v for k, v in simulated.items() if k != "evaluations"},
        "real": real and {"rows": real["rows"], "seconds_per_stage": mean_seconds(real["rows"]),
                          "track_length_histogram": real["track_length_histogram"]},
        "config": str(args.config), "checkpoints": str(args.checkpoints),
    }
    print(f"simulated (MU={args.pileup:g}, {len(simulated['rows'])} events): "
          f"efficiency {overall['efficiency']:.4f}, fake {overall['fake_rate']:.4f}, "
          f"duplicate {overall['duplicate_rate']:.4f}, score {overall['trackml_score']:.4f}")
    for name, part in [("simulated", simulated), ("real", real)]:
        if part:
            seconds = mean_seconds(part["rows"])
            hits = np.mean([r["n_hits"] for r in part["rows"]])
            print(f"{name}: {hits:,.0f} hits/event; seconds per event " +
                  ", ".join(f"{k} {v:.2f}" for k, v in seconds.items()))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2, default=float))


if __name__ == "__main__":
    main()
