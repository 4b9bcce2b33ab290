"""Trained models on every real TrackML event we have (default: the models shipped with trkx).

    python benchmarks/real_events.py --json out.json [--config PIPELINE.yaml --checkpoints DIR]
        [--data DIR] [--sim-events DIR] [--n-kaggle N] [--plot PNG]

One pipeline, loaded once, runs each event whole through ``TrainedPipeline.run`` (the one
inference path, hits only unless the models use cells):

- ``real_pixel_truth/`` (event 21001, 120,844 hits, truth for its pixel hits): the tracks
  projected onto the hits with truth (trkx.tracks.projection): efficiency, fake and duplicate
  rates (double majority, pT > 1 GeV, >= 3 truth hits, candidates of >= 3 projected hits);
- ``sample_event/`` (full truth, a 5% subsample): efficiency, fake and duplicate rates;
- ``kaggle_hits/`` (no truth, no cells: skipped for models that read cells, whose events are
  the two above): seconds per event (reading the hits file, the pipeline and the
  track table; median over the files after one warm-up event), tracks (>= 3 hits) per event,
  the process's peak resident memory, and the track-length distribution (hits per track,
  tracks of >= 3 hits) against the particles' ``nhits`` (>= 3) of the same events
  (``kaggle_particles/``, events 1001-1013): ``track_length_tvd`` = (1/2) sum_n |p(n) - q(n)|
  with lengths above 20 pooled; with ``--sim-events`` also against the reconstructed track
  lengths of simulated events (``track_length_tvd_sim``).
"""

from __future__ import annotations

if __name__ == "__main__":
    import harness
    harness.start()

import resource
import statistics
import sys
import time
from pathlib import Path

import harness
import numpy as np
import pandas as pd
from tqdm import tqdm

MAX_LENGTH = 20          # lengths above are pooled in the last bin


def length_histogram(lengths: np.ndarray) -> np.ndarray:
    """The distribution of lengths >= 3 over 3 .. MAX_LENGTH (the last bin: MAX_LENGTH+)."""
    clipped = np.minimum(lengths[lengths >= 3], MAX_LENGTH)
    counts = np.bincount(clipped, minlength=MAX_LENGTH + 1)[3:].astype(float)
    return counts / max(counts.sum(), 1.0)


def tvd(p: np.ndarray, q: np.ndarray) -> float:
    return 0.5 * float(np.abs(p - q).sum())


def track_lengths(labels: np.ndarray) -> np.ndarray:
    return np.bincount(np.unique(labels, return_inverse=True)[1])


def pixel_event(pipeline, data: Path) -> dict:
    from trkx.tracks.metrics import overall_summary
    from trkx.tracks.projection import (
        PIXEL_TRUTH,
        projected_evaluation,
        projected_record,
        read_tables,
    )

    prefix = data / "real_pixel_truth" / "event000021001"
    tables = read_tables(prefix, PIXEL_TRUTH, cells=pipeline.use_cells)
    record, mask = projected_record(tables, pipeline.use_cells, pipeline.signal_pt_min, None,
                                    21001)
    _, labels, seconds = pipeline.run(record)
    return {**overall_summary([projected_evaluation(record, mask, labels, 21001)]),
            "seconds": seconds}


def sample_event(pipeline, data: Path) -> dict:
    from trkx.data.detector import load_detector
    from trkx.data.events import event_record
    from trkx.tracks.building import tracks_frame
    from trkx.tracks.event_truth import truth_from_record
    from trkx.tracks.metrics import evaluate_event, overall_summary

    record = event_record(str(data / "sample_event" / "event000000001"), load_detector(),
                          pipeline.use_cells, pipeline.signal_pt_min)
    _, labels, _ = pipeline.run(record)
    return overall_summary([evaluate_event(truth_from_record(record),
                                           tracks_frame(record.hit_id, labels, 1))])


def run_unlabelled(pipeline, prefixes: list[str], desc: str) -> tuple[dict, dict]:
    """Seconds and track lengths per event (``event_id -> ...``), after one warm-up event."""
    from trkx.data.detector import load_detector
    from trkx.data.events import event_record
    from trkx.tracks.building import tracks_frame

    detector = load_detector()
    seconds, lengths = {}, {}
    for i, prefix in enumerate(tqdm([prefixes[0], *prefixes], desc=desc, unit="event")):
        start = time.perf_counter()
        record = event_record(prefix, detector, pipeline.use_cells, pipeline.signal_pt_min,
                              with_truth=False)
        _, labels, _ = pipeline.run(record)
        tracks_frame(record.hit_id, labels, int(record.event_id))
        if i > 0:                            # the first pass is the warm-up
            seconds[int(record.event_id)] = time.perf_counter() - start
            lengths[int(record.event_id)] = track_lengths(labels)
    return seconds, lengths


def particle_lengths(data: Path, event_ids: list[int]) -> np.ndarray:
    found = [data / "kaggle_particles" / f"event{e:09d}-particles.csv.gz" for e in event_ids]
    return np.concatenate([pd.read_csv(p)["nhits"].to_numpy() for p in found if p.is_file()]
                          or [np.zeros(0, int)])


def plot(histograms: dict[str, np.ndarray], path: Path) -> None:
    x = np.arange(3, MAX_LENGTH + 1)
    fig, ax = harness.pyplot().subplots(figsize=(7, 4))
    for label, h in histograms.items():
        ax.step(x, h, where="mid", label=label)
    ax.set_xlabel(f"hits per track (>= 3; {MAX_LENGTH} = {MAX_LENGTH} or more)")
    ax.set_ylabel("share of tracks")
    ax.grid(alpha=0.3)
    ax.legend()
    harness.save_figure(fig, path)


def main(argv: list[str] | None = None) -> int:
    parser = harness.parser(__doc__, models=True, data=True, plot=True, require_json=True)
    parser.set_defaults(threads=2)
    parser.add_argument("--sim-events", type=Path, default=None,
                        help="simulated TrackML events to compare track lengths with")
    parser.add_argument("--n-sim", type=int, default=3, help="simulated events used")
    parser.add_argument("--n-kaggle", type=int, default=None, help="only the first N files")
    args = harness.parse(parser, argv)
    if (args.config is None) != (args.checkpoints is None):
        parser.error("give --config and --checkpoints together (neither: shipped models)")
    import torch

    from trkx.data.listing import event_prefixes

    pipeline = harness.load_pipeline(args)
    if args.config is None:
        from trkx.models import shipped_models

        models = shipped_models()
        config, checkpoints = models.config, models.checkpoints
    else:
        config, checkpoints = args.config, args.checkpoints
    megabytes = sum((Path(checkpoints) / f"{s}.pt").stat().st_size
                    for s in ("embedding", "filter", "gnn")) / 1e6
    pixel = pixel_event(pipeline, args.data)
    sample = sample_event(pipeline, args.data)
    result = {
        "config": str(config), "checkpoints": str(checkpoints),
        "torch_threads": torch.get_num_threads(),
        "real_pixel_efficiency": pixel["efficiency"],
        "real_pixel_efficiency_err": pixel["efficiency_err"],
        "real_pixel_fake_rate": pixel["fake_rate"],
        "real_pixel_duplicate_rate": pixel["duplicate_rate"],
        "real_pixel_signal_particles": pixel["n_signal_particles"],
        "real_pixel_seconds": pixel["seconds"],
        "sample_efficiency": sample["efficiency"],
        "sample_efficiency_err": sample["efficiency_err"],
        "sample_fake_rate": sample["fake_rate"],
        "sample_duplicate_rate": sample["duplicate_rate"],
        "model_megabytes": megabytes,
    }
    histograms: dict[str, np.ndarray] = {}
    if not pipeline.use_cells:       # the Kaggle hit files have no cells
        kaggle = event_prefixes(args.data / "kaggle_hits")[: args.n_kaggle]
        seconds, lengths = run_unlabelled(pipeline, kaggle, "kaggle")
        peak_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6   # KiB on Linux
        with_particles = [e for e in lengths if 1001 <= e <= 1013]
        histograms = {
            "Kaggle events 1001-1013, tracks": length_histogram(
                np.concatenate([lengths[e] for e in with_particles] or [np.zeros(0, int)])),
            "their particles (nhits)": length_histogram(particle_lengths(args.data,
                                                                         with_particles)),
        }
        result.update({
            "kaggle_seconds": seconds,
            "kaggle_median_seconds": statistics.median(seconds.values()),
            "kaggle_peak_memory_gb": peak_gb,
            "kaggle_tracks_per_event": float(np.mean([(n >= 3).sum()
                                                      for n in lengths.values()])),
            "track_length_tvd": tvd(*histograms.values()),
        })
    if args.sim_events is not None:
        _, sim = run_unlabelled(pipeline, event_prefixes(args.sim_events)[: args.n_sim],
                                "simulated")
        histograms["simulated test events, tracks"] = length_histogram(
            np.concatenate(list(sim.values())))
        if "Kaggle events 1001-1013, tracks" in histograms:
            result["track_length_tvd_sim"] = tvd(histograms["Kaggle events 1001-1013, tracks"],
                                                 histograms["simulated test events, tracks"])
    result["track_length_histograms"] = {k: v.tolist() for k, v in histograms.items()}
    plot(histograms, args.plot)
    harness.write_json(args.json, result)
    kaggle_line = ("Kaggle hit files: skipped (no cells; these models read cells)\n"
                   if "kaggle_seconds" not in result else
                   f"Kaggle ({len(result['kaggle_seconds'])} events): median "
                   f"{result['kaggle_median_seconds']:.2f} s, peak memory "
                   f"{result['kaggle_peak_memory_gb']:.2f} GB, "
                   f"{result['kaggle_tracks_per_event']:.0f} tracks per event, track-length "
                   f"TVD vs particles {result['track_length_tvd']:.3f}\n")
    print(f"event 21001 (pixel projection): efficiency {pixel['efficiency']:.3f} +- "
          f"{pixel['efficiency_err']:.3f} ({pixel['n_signal_particles']} signal particles), "
          f"fake {pixel['fake_rate'] or 0:.3f}, duplicate {pixel['duplicate_rate'] or 0:.3f}\n"
          f"sample event: efficiency {sample['efficiency']:.3f}, fake "
          f"{sample['fake_rate'] or 0:.3f}\n" + kaggle_line + f"models: {megabytes:.2f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
