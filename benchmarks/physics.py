"""Physics benchmark: where the pipeline finds tracks and where it loses them.

    python benchmarks/physics.py --config configs/quickstart.yaml --workdir runs/physics \
        [--hits-only-config configs/quickstart_hits_only.yaml] --json out.json [--plots DIR]

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
- the same models on the real sample event (``$TRKX_DATA/sample_event``, truth and cells);
- plots: signal-edge efficiency per stage vs pT and eta.

With ``--hits-only-config`` a second pipeline without cell features is run and evaluated on
the real sample event too. ``seconds`` is the end-to-end time of the run (the sum of its steps,
as recorded when they ran).
"""

from __future__ import annotations

if __name__ == "__main__":
    import harness
    harness.start()

import glob
import json
import subprocess
import sys
import time
from pathlib import Path

import harness
import numpy as np
from physics_analysis import (
    ETA_BINS,
    PT_BINS,
    edge_losses,
    efficiency_by,
    efficiency_by_origin,
    pipeline_stages,
    stage_edges,
    track_figures,
    upper_bound,
)

from trkx.data.record import load_record

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


def real_sample(pipeline, sample_dir: Path) -> dict:
    """Stage edges and tracks of the trained pipeline on the real sample event."""
    from trkx.data.detector import load_detector
    from trkx.data.events import event_record
    from trkx.data.listing import event_prefixes

    prefix = event_prefixes(sample_dir)[0]
    record = event_record(prefix, load_detector(), pipeline.use_cells, 1.0)
    graphs, _, seconds = pipeline.run(record, edge_labels=True)
    stages = pipeline_stages({s: [g] for s, g in graphs.items()}, pipeline.builder)
    summary, _ = track_figures([graphs["gnn"]], pipeline.builder)
    return {"stages": stage_edges(stages), "tracks": {k: summary[k] for k in HEADLINE},
            "seconds": seconds}


def plot_efficiency(result: dict, variable: str, label: str, path: Path) -> None:
    bins = np.asarray(result["bins"], dtype=float)
    finite = np.where(np.isfinite(bins), bins, bins[-2] * 2)
    centres = 0.5 * (finite[:-1] + finite[1:])
    fig, ax = harness.pyplot().subplots(figsize=(6, 4))
    for stage in ("embedding", "filter", "gnn"):
        if stage in result:
            ax.plot(centres, result[stage], marker="o", label=stage)
    ax.set_xlabel(label)
    ax.set_ylabel("signal-edge efficiency (cumulative)")
    if variable == "pt":
        ax.set_xscale("log")
    ax.grid(alpha=0.3)
    ax.legend()
    harness.save_figure(fig, path)


def analyse(config: Path, workdir: Path, plots: Path | None) -> dict:
    from trkx.pipeline.inference import TrainedPipeline

    pipeline = TrainedPipeline.load(config, workdir / "checkpoints")
    builder = pipeline.builder
    emb, fil, gnn = (records(workdir, s) for s in ("embedding", "filter", "gnn"))
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
    sample = harness.DATA / "sample_event"
    out["real_sample"] = real_sample(pipeline, sample) if sample.is_dir() else None
    return out


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
    for stage, categories in result["losses"].items():
        worst = categories["layer_pair"][:4]
        print(f"  lost at {stage}: " + ", ".join(
            f"{row['category']} {row['lost']}/{row['of']}" for row in worst))
        print("     by position: " + ", ".join(
            f"{row['category']} {row['lost']}/{row['of']}" for row in categories["position"])
              + "; by pT: " + ", ".join(f"{row['category']} {row['lost']}/{row['of']}"
                                        for row in categories["pt"][:3]))
    real = result.get("real_sample")
    if real:
        rt = real["tracks"]
        print("  real sample event: " + ", ".join(
            f"{s} {m['efficiency']:.3f}" for s, m in real["stages"].items())
              + f"; tracks efficiency {rt['efficiency']:.3f}, fake {rt['fake_rate']:.3f}")


def main() -> int:
    parser = harness.parser(__doc__, plots=True)
    parser.set_defaults(threads=2)
    parser.add_argument("--config", type=Path, default=REPO / "configs" / "quickstart.yaml")
    parser.add_argument("--hits-only-config", type=Path, default=None)
    parser.add_argument("--workdir", type=Path, default=REPO / "runs" / "physics")
    parser.add_argument("--no-run", action="store_true", help="analyse existing workdirs only")
    args = harness.parse(parser)
    runs = {"cells": (args.config, args.workdir)}
    if args.hits_only_config is not None:
        runs["hits_only"] = (args.hits_only_config, args.workdir.with_name(
            args.workdir.name + "_hits_only"))
    results: dict[str, dict] = {}
    for name, (config, workdir) in runs.items():
        start = time.perf_counter()
        seconds = (run_pipeline(config, workdir) if not args.no_run else float("nan"))
        result = analyse(config, workdir, args.plots / name if args.plots else None)
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
        "real_sample_efficiency": {name: (r["real_sample"]["tracks"]["efficiency"]
                                          if r.get("real_sample") else None)
                                   for name, r in results.items()},
        "seconds": main_run["seconds"],
        "runs": results,
    }
    harness.write_json(args.json, summary)
    print(f"\nefficiency {summary['efficiency']:.4f}, fake rate {summary['fake_rate']:.4f}, "
          f"duplicate rate {summary['duplicate_rate']:.4f}, seconds {summary['seconds']:.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
