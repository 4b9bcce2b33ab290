"""Physics benchmark: where the pipeline finds tracks and where it loses them, on simulated
and on every real event we have.

    python benchmarks/physics.py --config configs/quickstart.yaml --workdir runs/physics \
        [--hits-only-config configs/quickstart_hits_only.yaml] [--no-run] [--no-real] \
        --json out.json [--plots DIR] [--n-kaggle N]

Runs (or resumes) ``trkx run CONFIG`` and then, on the held-apart simulated test events:

- per stage: signal-edge efficiency (cumulative and of the edges received), purity (truth-graph
  edges among kept ones, docs/design.md) and edges per hit, at the stage's working point;
- upper bounds: track efficiency / fake rate with truth labels as scores on the embedding and
  the filter graphs (what perfect later stages would reach);
- tracks: double-majority efficiency, fake rate (a track matching no particle at all),
  duplicate rate and TrackML score, with binomial errors;
- where signal edges are lost, per stage (layer pairs, pT, first/last edge, overlap hits);
- track efficiency by the production radius of the particle (prompt, r_v <= 1 mm, and
  secondaries in bins of r_v), from the test events' particle tables;
- the signal pairs each stage keeps by the particle's vertex |z| (``efficiency_vs_vertex_z``:
  where along the beam the far vertices are lost, stage by stage);
- plots: signal-edge efficiency per stage vs pT and eta.

Then the same models on the real events (``--data``; ``--no-real`` skips them), each through
``TrainedPipeline.event_tracks``, the engine of ``trkx infer``:

- event 21001 (``real_pixel_truth/``, truth for its pixel hits): the tracks projected onto the
  hits with truth (``pixel_truth_report``, as ``trkx infer`` prints it): ``real_pixel_*``
  (efficiency, fake and duplicate rates), the anchors' count (``real_pixel_anchors``) and the
  efficiency by vertex |z| (``real_pixel_vertex_z``);
- the sample event (full truth, a 5% subsample): per-stage edges and tracks, ``sample_*``;
- the Kaggle hit files (no truth, no cells: hits-only models): seconds per event after one
  warm-up (``kaggle_median_seconds``), tracks of >= 3 hits per event, the peak resident memory,
  and ``track_length_tvd`` = (1/2) sum_n |p(n) - q(n)| between the track lengths and the
  particles' ``nhits`` (>= 3; lengths above 20 pooled) of events 1001-1013
  (``kaggle_particles/``), plotted beside ``--json``.

With ``--hits-only-config`` a second pipeline without cell features is analysed the same way.
``seconds`` is the end-to-end time of the run (the sum of its steps, as recorded when they ran).
"""

from __future__ import annotations

if __name__ == "__main__":
    import harness
    harness.start()

import glob
import itertools
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import harness
import numpy as np

from trkx.data.record import load_record
from trkx.stage_names import LEARNED_STAGES
from trkx.tracks.evaluate.stage_losses import (
    ETA_BINS,
    PT_BINS,
    VERTEX_Z_BINS,
    edge_losses,
    efficiency_by,
    efficiency_by_origin,
    pipeline_stages,
    stage_edges,
    track_figures,
    upper_bound,
)

REPO = harness.REPO
HEADLINE = ("efficiency", "efficiency_err", "fake_rate", "fake_rate_err", "duplicate_rate",
            "trackml_score")


def run_pipeline(config: Path, workdir: Path) -> float:
    """``trkx run`` (resumes); the end-to-end seconds recorded by its step markers."""
    subprocess.run([sys.executable, "-m", "trkx", "run", str(config), "--workdir",
                    str(workdir)], check=True, cwd=REPO)
    markers = sorted((workdir / ".trkx" / "steps").glob("*.json"))
    return float(sum(json.loads(m.read_text())["seconds"] for m in markers))


def records(workdir: Path, stage: str, split: str = "test") -> list:
    return [load_record(p) for p in sorted(glob.glob(str(workdir / "graphs" / split / stage
                                                         / "*.pt")))]


def production_radius(events: Path) -> dict[int, dict[int, float]]:
    """``r_v`` (mm) of every particle of every event in ``events`` (its particles tables)."""
    from trkx.data.io import event_id_from_prefix, find_part_file, read_part
    from trkx.data.listing import event_prefixes

    radius = {}
    for prefix in event_prefixes(events):
        table = read_part(find_part_file(prefix, "particles"), "particles")
        radius[event_id_from_prefix(prefix)] = dict(zip(
            table["particle_id"].astype(np.int64), np.hypot(table["vx"], table["vy"])))
    return radius


MAX_LENGTH = 20          # track lengths above are pooled in the last bin
PIXEL_EVENT = ("real_pixel_truth", "event000021001", 21001)
SAMPLE_EVENT = ("sample_event", "event000000001")


def length_histogram(lengths: np.ndarray) -> np.ndarray:
    """The distribution of lengths >= 3 over 3 .. MAX_LENGTH (the last bin: MAX_LENGTH+)."""
    clipped = np.minimum(lengths[lengths >= 3], MAX_LENGTH)
    counts = np.bincount(clipped, minlength=MAX_LENGTH + 1)[3:].astype(float)
    return counts / max(counts.sum(), 1.0)


def kaggle_events(pipeline, detector, data: Path, n_events: int | None) -> dict:
    """Seconds, tracks and track lengths of the Kaggle hit files (module docstring)."""
    import pandas as pd

    from trkx.data.listing import event_prefixes

    prefixes = event_prefixes(data / "kaggle_hits")[:n_events]
    seconds, lengths = {}, {}
    for i, prefix in enumerate([prefixes[0], *prefixes]):
        start = time.perf_counter()
        event = pipeline.event_tracks(detector, prefix)
        if i > 0:                            # the first pass is the warm-up
            seconds[event.event_id] = time.perf_counter() - start
            lengths[event.event_id] = event.tracks.groupby("track_id").size().to_numpy()
    known = [e for e in lengths if 1001 <= e <= 1013]
    files = [data / "kaggle_particles" / f"event{e:09d}-particles.csv.gz" for e in known]
    nhits = [pd.read_csv(f)["nhits"].to_numpy() for f in files if f.is_file()]
    histograms = {
        "Kaggle events 1001-1013, tracks": length_histogram(
            np.concatenate([lengths[e] for e in known] or [np.zeros(0, int)])),
        "their particles (nhits)": length_histogram(np.concatenate(nhits or [np.zeros(0, int)]))}
    tracks, particles = histograms.values()
    return {"kaggle_seconds": seconds,
            "kaggle_median_seconds": statistics.median(seconds.values()),
            "kaggle_peak_memory_gb": harness.peak_rss_kib() / 2**20,
            "kaggle_tracks_per_event": float(np.mean([(n >= 3).sum() for n in lengths.values()])),
            "track_length_tvd": (0.5 * float(np.abs(tracks - particles).sum())
                                 if known and nhits else None),
            "track_length_histograms": {k: v.tolist() for k, v in histograms.items()}}


def real_events(pipeline, data: Path, n_kaggle: int | None) -> dict:
    """The models on event 21001, the sample event and the Kaggle hit files."""
    from trkx.data.detector import load_detector
    from trkx.tracks.evaluate.event_truth import truth_from_record
    from trkx.tracks.evaluate.metrics import MetricCuts, evaluate_event, overall_summary
    from trkx.tracks.evaluate.projection import pixel_truth_report

    detector = load_detector()
    folder, name, event_id = PIXEL_EVENT
    prefix = data / folder / name
    pixel = pixel_truth_report([(prefix, pipeline.event_tracks(detector, prefix).tracks,
                                 event_id)])
    sample = pipeline.event_tracks(detector, data / SAMPLE_EVENT[0] / SAMPLE_EVENT[1],
                                   graphs_with_truth=True)
    stages = pipeline_stages({s: [g] for s, g in sample.graphs.items()}, pipeline.builder)
    tracks = overall_summary([evaluate_event(truth_from_record(sample.graphs["gnn"]),
                                             sample.tracks, MetricCuts())])
    out = {"real_pixel_efficiency": pixel["efficiency"],
           "real_pixel_efficiency_err": pixel["efficiency_err"],
           "real_pixel_fake_rate": pixel["fake_rate"],
           "real_pixel_duplicate_rate": pixel["duplicate_rate"],
           "real_pixel_signal_particles": pixel["n_signal_particles"],
           "real_pixel_anchors": {k: pixel["anchors"][k] for k in
                                  ("efficiency", "efficiency_err", "fake_rate_signal_majority",
                                   "n_signal_particles")},
           "real_pixel_vertex_z": {k: v for k, v in pixel.items()
                                   if k.startswith("efficiency_vz_")},
           "sample_stages": stage_edges(stages),
           "sample_efficiency": tracks["efficiency"], "sample_fake_rate": tracks["fake_rate"],
           "sample_duplicate_rate": tracks["duplicate_rate"]}
    out["real_pixel_anchors"]["fake_rate"] = out["real_pixel_anchors"].pop(
        "fake_rate_signal_majority")
    if not pipeline.use_cells:       # the Kaggle hit files have no cells
        out.update(kaggle_events(pipeline, detector, data, n_kaggle))
    return out


def plot_lengths(histograms: dict[str, list[float]], path: Path) -> None:
    x = np.arange(3, MAX_LENGTH + 1)
    fig, ax = harness.pyplot().subplots(figsize=(7, 4))
    for label, h in histograms.items():
        ax.step(x, h, where="mid", label=label)
    ax.set_xlabel(f"hits per track (>= 3; {MAX_LENGTH} = {MAX_LENGTH} or more)")
    ax.set_ylabel("share of tracks")
    ax.grid(alpha=0.3)
    ax.legend()
    harness.save_figure(fig, path)


def plot_efficiency(result: dict, variable: str, label: str, path: Path) -> None:
    bins = np.asarray(result["bins"], dtype=float)
    finite = np.where(np.isfinite(bins), bins, bins[-2] * 2)
    centres = 0.5 * (finite[:-1] + finite[1:])
    fig, ax = harness.pyplot().subplots(figsize=(6, 4))
    for stage in LEARNED_STAGES:
        if stage in result:
            ax.plot(centres, result[stage], marker="o", label=stage)
    ax.set_xlabel(label)
    ax.set_ylabel("signal-edge efficiency (cumulative)")
    if variable == "pt":
        ax.set_xscale("log")
    ax.grid(alpha=0.3)
    ax.legend()
    harness.save_figure(fig, path)


def analyse(config: Path, workdir: Path, plots: Path | None) -> tuple[dict, object]:
    """The simulated test events' figures (module docstring), and the loaded pipeline."""
    from trkx.pipeline.inference import TrainedPipeline

    pipeline = TrainedPipeline.load(config, workdir / "checkpoints")
    builder = pipeline.builder
    emb, fil, gnn = (records(workdir, s) for s in LEARNED_STAGES)
    stages = pipeline_stages({"embedding": emb, "filter": fil, "gnn": gnn}, builder)
    tracks, evaluations = track_figures(gnn, builder)
    out = {
        "stages": stage_edges(stages),
        "upper_bound": {"embedding": upper_bound(emb, builder),
                        "filter": upper_bound(fil, builder)},
        "tracks": tracks,
        "losses": edge_losses(stages),
        "efficiency_vs_pt": efficiency_by(stages, "pt", PT_BINS),
        "efficiency_vs_eta": efficiency_by(stages, "eta", ETA_BINS),
        "efficiency_vs_vertex_z": efficiency_by(stages, "vertex_z", VERTEX_Z_BINS,
                                                absolute=True),
        "efficiency_by_origin": efficiency_by_origin(
            evaluations, production_radius(workdir / "data" / "test")),
        "builder": {"method": builder.method, "walk_cut": builder.walk_cut,
                    "cc_cut": builder.cc_cut, "min_length": builder.min_length},
    }
    if plots is not None:
        plot_efficiency(out["efficiency_vs_pt"], "pt", "particle pT [GeV]",
                        plots / "edge_efficiency_vs_pt.png")
        plot_efficiency(out["efficiency_vs_eta"], "eta", "particle eta",
                        plots / "edge_efficiency_vs_eta.png")
    return out, pipeline


def print_report(name: str, result: dict) -> None:
    print(f"\n=== {name}")
    for stage, m in result["stages"].items():
        print(f"  {stage:9s} efficiency {m['efficiency']:.4f} (of received "
              f"{m['efficiency_of_received']:.4f})  purity {m['purity']:.3f}  "
              f"{m['edges_per_hit']:.2f} edges/hit  cut {m['cut']}; signal pairs kept "
              f"{m['signal_pairs']:.4f}, pixel barrel {m['pixel_barrel_signal_pairs']:.4f}")
    for stage, ub in result["upper_bound"].items():
        print(f"  upper bound ({stage} graph, truth scores): efficiency "
              f"{ub['efficiency']:.4f}, fake rate {ub['fake_rate']:.4f}")
    t = result["tracks"]
    print(f"  tracks: efficiency {t['efficiency']:.4f} +- {t['efficiency_err']:.4f}, fake "
          f"{t['fake_rate']:.4f}, duplicate {t['duplicate_rate']:.4f}, TrackML score "
          f"{t['trackml_score']:.4f}  ({t['n_signal_particles']} signal particles)")
    origin = result["efficiency_by_origin"]
    bins = origin["bins_mm"]
    print(f"  tracks by production radius: prompt {origin['prompt']['efficiency']:.4f} "
          f"({origin['prompt']['signal_particles']}), displaced "
          f"{origin['displaced']['efficiency']:.4f} ({origin['displaced']['signal_particles']}); "
          + ", ".join(f"{lo:g}-{hi:g} mm {b['efficiency']:.3f} ({b['signal_particles']})"
                      for lo, hi, b in zip(bins[:-1], bins[1:], origin["per_bin"])))
    by_z = result["efficiency_vs_vertex_z"]
    edges = by_z["bins"]
    print("  signal pairs kept by vertex |z| [mm]: " + "; ".join(
        f"{lo:g}-{hi:g} " + " / ".join(f"{by_z[s][i]:.3f}" for s in result["stages"])
        for i, (lo, hi) in enumerate(itertools.pairwise(edges)))
          + f"  ({' / '.join(result['stages'])})")
    for stage, categories in result["losses"].items():
        worst = categories["layer_pair"][:4]
        print(f"  lost at {stage}: " + ", ".join(
            f"{row['category']} {row['lost']}/{row['of']}" for row in worst))
        print("     by position: " + ", ".join(
            f"{row['category']} {row['lost']}/{row['of']}" for row in categories["position"])
              + "; by pT: " + ", ".join(f"{row['category']} {row['lost']}/{row['of']}"
                                        for row in categories["pt"][:3]))
    real = result.get("real")
    if real:
        print(f"  event 21001 (pixel projection): efficiency {real['real_pixel_efficiency']:.3f}"
              f" ({real['real_pixel_signal_particles']} signal particles), fake "
              f"{real['real_pixel_fake_rate']:.4f}; anchors' count "
              f"{real['real_pixel_anchors']['efficiency']:.3f} / fake "
              f"{real['real_pixel_anchors']['fake_rate']:.4f}")
        print("  real sample event: " + ", ".join(
            f"{s} {m['efficiency']:.3f}" for s, m in real["sample_stages"].items())
              + f"; tracks efficiency {real['sample_efficiency']:.3f}, fake "
              f"{real['sample_fake_rate']:.3f}")
        if "kaggle_median_seconds" in real:
            print(f"  Kaggle hit files: median {real['kaggle_median_seconds']:.2f} s, peak "
                  f"{real['kaggle_peak_memory_gb']:.2f} GB, "
                  f"{real['kaggle_tracks_per_event']:.0f} tracks per event, track-length TVD "
                  f"{real['track_length_tvd']}")


def main() -> int:
    parser = harness.parser(__doc__, plots=True, data=True, plot=True)
    parser.set_defaults(threads=2)
    parser.add_argument("--config", type=Path, default=REPO / "configs" / "quickstart.yaml")
    parser.add_argument("--hits-only-config", type=Path, default=None)
    parser.add_argument("--workdir", type=Path, default=REPO / "runs" / "physics")
    parser.add_argument("--no-run", action="store_true", help="analyse existing workdirs only")
    parser.add_argument("--no-real", action="store_true", help="skip the real events")
    parser.add_argument("--n-kaggle", type=int, default=None, help="only the first N Kaggle "
                        "hit files (hits-only models)")
    args = harness.parse(parser)
    if not args.no_real and not (args.data / PIXEL_EVENT[0]).is_dir():
        parser.error(f"{args.data}: no {PIXEL_EVENT[0]}/ there (--data or $TRKX_DATA, or "
                     "--no-real)")
    runs = {"cells": (args.config, args.workdir)}
    if args.hits_only_config is not None:
        runs["hits_only"] = (args.hits_only_config, args.workdir.with_name(
            args.workdir.name + "_hits_only"))
    results: dict[str, dict] = {}
    for name, (config, workdir) in runs.items():
        start = time.perf_counter()
        seconds = (run_pipeline(config, workdir) if not args.no_run else float("nan"))
        result, pipeline = analyse(config, workdir, args.plots / name if args.plots else None)
        if not args.no_real:
            result["real"] = real_events(pipeline, args.data, args.n_kaggle)
        result["seconds"] = seconds
        result["analysis_seconds"] = time.perf_counter() - start
        results[name] = result
        print_report(f"{name}: {config} in {workdir}", result)
    main_run = results["cells"]
    summary = {
        **{k: main_run["tracks"][k] for k in ("efficiency", "efficiency_err", "fake_rate",
                                              "duplicate_rate", "trackml_score")},
        "stage_efficiency": {s: m["efficiency_of_received"]
                             for s, m in main_run["stages"].items()},
        "stage_efficiency_cumulative": {s: m["efficiency"]
                                        for s, m in main_run["stages"].items()},
        "edges_per_hit": {s: m["edges_per_hit"] for s, m in main_run["stages"].items()},
        "signal_pairs": {s: m["signal_pairs"] for s, m in main_run["stages"].items()},
        "pixel_barrel_signal_pairs": {s: m["pixel_barrel_signal_pairs"]
                                      for s, m in main_run["stages"].items()},
        "gnn_purity": main_run["stages"]["gnn"]["purity"],
        "efficiency_prompt": main_run["efficiency_by_origin"]["prompt"]["efficiency"],
        "efficiency_displaced": main_run["efficiency_by_origin"]["displaced"]["efficiency"],
        "upper_bound_efficiency": {s: ub["efficiency"]
                                   for s, ub in main_run["upper_bound"].items()},
        **{k: v for k, v in (main_run.get("real") or {}).items()
           if k not in ("kaggle_seconds", "track_length_histograms")},
        "model_megabytes": sum((args.workdir / "checkpoints" / f"{s}.pt").stat().st_size
                               for s in LEARNED_STAGES) / 1e6,
        "seconds": main_run["seconds"],
        "runs": results,
    }
    harness.write_json(args.json, summary)
    lengths = (main_run.get("real") or {}).get("track_length_histograms")
    if lengths and args.plot is not None:
        plot_lengths(lengths, args.plot)
    print(f"\nefficiency {summary['efficiency']:.4f}, fake rate {summary['fake_rate']:.4f}, "
          f"duplicate rate {summary['duplicate_rate']:.4f}, seconds {summary['seconds']:.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
