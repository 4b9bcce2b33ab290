"""``trkx evaluate --tracks DIR --events DIR --out DIR``: tracking performance with plots.

For every ``eventNNNNNNNNN-tracks.csv`` in ``--tracks`` the truth comes from ``--events``: an
event record ``eventNNNNNNNNN*.pt`` (with per-hit truth), else the TrackML files
``eventNNNNNNNNN-{hits,particles,truth}.csv[.gz]``. Writes to ``--out``:

- ``metrics.json``: ``cuts``, ``overall`` (efficiency, fake_rate, duplicate_rate,
  trackml_score, counts, binomial errors; the fake rate split by kind, ``fake_rate_<kind>``:
  pieces of one signal or other particle, mixed, noise, trkx.tracks.metrics), ``events``
  (the same per event), ``binned`` (the plotted rates with Clopper-Pearson 68% intervals)
  and ``edges`` (edge efficiency/purity per stage, when records with edges are given);
- ``particles.csv`` and ``tracks.csv``: the per-particle and per-track tables behind them;
- when the tracks folder holds ``eventNNNNNNNNN-parameters.csv`` (``trkx infer`` writes them):
  ``resolution`` in ``metrics.json`` (fitted pT and eta against the matched signal particles;
  phi, d0, z0 and charge of the prompt ones when ``--events`` are TrackML files with their
  particle table: trkx.tracks.resolution), ``parameters.csv`` (fitted and true values per
  matched signal track) and the ``pt_resolution`` plot;
- PNG plots: efficiency vs pT, vs eta, vs the particle's hit count and vs production radius,
  fake rate vs eta, duplicate rate vs eta, track length.

Every efficiency is split into prompt particles (production radius <= 1 mm) and secondaries
(``efficiency_prompt``, ``efficiency_secondary`` in ``metrics.json``, both printed), when the
truth holds production vertices (TrackML particle files, records with ``production_radius``),
and by the vertex |z| along the beam (0-50, 50-100, 100-150, > 150 mm: ``efficiency_vz_*``, and
per origin; plot ``efficiency_vs_vertex_z``); the prompt particles from |z| < 100 mm by their
hit count (3, 4, 5+: ``efficiency_prompt_near_hits_*``). ``anchors`` in ``metrics.json`` (and a
printed line) counts as the published pipelines do (HEPTv2's evaluation, trkx.tracks.anchors):
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
import json
import math
import time
from pathlib import Path

STAGE_NAMES: tuple[str, ...] = ("embedding", "filter", "gnn")
# trkx.tracks.metrics.FAKE_KINDS as printed (kept here: the CLI imports numpy-free at start)
FAKE_KIND_NAMES: dict[str, str] = {"piece_signal": "pieces of signal particles",
                                   "piece_other": "pieces of other particles",
                                   "mixed": "mixed", "noise": "noise"}
# and efficiency_vs_production_radius where the truth has vertices
PLOTS = ("efficiency_vs_pt", "efficiency_vs_eta", "efficiency_vs_particle_hits",
         "fake_rate_vs_eta", "duplicate_rate_vs_eta", "track_length")


def register(subparsers: argparse._SubParsersAction) -> None:
    from trkx.cli._help import description

    parser = subparsers.add_parser(
        "evaluate", help="efficiency, fake/duplicate rate, TrackML score and plots",
        description=description(__doc__), formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--tracks", type=Path, required=True,
                        help="folder of eventNNNNNNNNN-tracks.csv files")
    parser.add_argument("--events", type=Path, required=True,
                        help="folder of event records (*.pt) or TrackML events with truth")
    parser.add_argument("--out", type=Path, required=True, help="output folder")
    parser.add_argument("--config", default=None, help="YAML config (configs/tracks.yaml)")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="KEY=VALUE", help="override, e.g. metrics.matching=atlas")
    parser.add_argument("--checkpoint", type=Path, default=None,
                        help="the GNN checkpoint: builder keys left null take its working point")
    parser.add_argument("--edge-cut", type=float, default=None,
                        help="score cut for edge efficiency/purity (default: the builder's "
                             "cut of --config)")
    parser.add_argument("--stage", action="append", default=[], metavar="NAME=DIR",
                        help="also report edge efficiency/purity of the records in DIR "
                             f"(NAME: {', '.join(STAGE_NAMES)})")
    parser.set_defaults(func=run)


def _json_safe(value):
    """NaN -> null, numpy scalars -> Python numbers, recursively."""
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def load_truth(source: Path, event_id: int):
    """``(EventTruth, record or None, particles table or None)`` from a record file or a
    TrackML prefix."""
    from trkx.data.io import load_event
    from trkx.data.record import load_record
    from trkx.tracks.event_truth import truth_from_frames, truth_from_record

    if source.suffix == ".pt":
        record = load_record(source)
        try:
            truth = truth_from_record(record, str(source))
        except ValueError as exc:
            from trkx.data.errors import TrackMLFormatError
            raise TrackMLFormatError(str(exc)) from exc
        return truth, record, None
    hits, particles, truth = load_event(source, ["hits", "particles", "truth"], detector=None)
    return truth_from_frames(event_id, hits, particles, truth), None, particles


def stage_edge_metrics(name: str, folder: Path, cut: float, cuts=None) -> dict:
    from trkx.data.listing import record_event_id, record_paths
    from trkx.data.record import load_record
    from trkx.tracks.edge_metrics import edge_metrics, pool_edge_metrics

    per_event = []
    for path in record_paths(folder, allow_empty=True):
        metrics = edge_metrics(load_record(path), cut, cuts)
        if metrics is not None:
            per_event.append({"event_id": record_event_id(path), **metrics})
    return {"stage": name, "overall": pool_edge_metrics(per_event) if per_event else None,
            "events": per_event}


def format_stage_edges(name: str, pooled: dict) -> str:
    """One line of a stage's pooled edge figures; with production radii, each population's
    edge efficiency and findable share (trkx.tracks.edge_metrics)."""
    line = (f"  edges [{name}] efficiency {pooled['efficiency']:.4f}, purity "
            f"{pooled['purity']:.4f} ({pooled['n_kept']:,d} of {pooled['n_edges']:,d} edges kept)")
    if "findable_prompt" in pooled:
        line += (f"\n    prompt: edges {_rate(pooled['efficiency_prompt']).strip()}, findable "
                 f"{_rate(pooled['findable_prompt']).strip()};  secondary: edges "
                 f"{_rate(pooled['efficiency_secondary']).strip()}, findable "
                 f"{_rate(pooled['findable_secondary']).strip()}")
    return line


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


def _rate(value) -> str:
    return "    n/a" if value is None or value != value else f"{value:>7.4f}"


def format_table(overall: dict, events: list[dict]) -> str:
    """The short stdout summary."""
    def pct(name: str) -> str:
        value, err = overall[name], overall[f"{name}_err"]
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return "n/a"
        return f"{100 * value:6.2f} +- {100 * err:.2f} %"
    header = (f"events {overall['n_events']}, hits {overall['n_hits']:,d}, signal particles "
              f"{overall['n_signal_particles']:,d}, tracks {overall['n_tracks']:,d}")
    lines = [header,
             f"  efficiency       {pct('efficiency')}"]
    if overall.get("efficiency_prompt") is not None:
        lines += [f"    prompt         {pct('efficiency_prompt')}  "
                  f"({overall['n_signal_prompt']:,d} particles, production radius <= 1 mm)",
                  f"    secondary      {pct('efficiency_secondary')}  "
                  f"({overall['n_signal_secondary']:,d})"]
    lines += [f"  fake rate        {pct('fake_rate')}"]
    kinds = {kind: overall.get(f"fake_rate_{kind}") for kind in FAKE_KIND_NAMES}
    if all(value is not None and value == value for value in kinds.values()):
        lines.append("    " + ", ".join(f"{name} {100 * kinds[kind]:.2f} %"
                                          for kind, name in FAKE_KIND_NAMES.items()))
    lines += [f"  duplicate rate   {pct('duplicate_rate')}",
              f"  TrackML score    {overall['trackml_score']:.4f}"]
    if len(events) > 1:
        lines.append(f"  {'event':>10s} {'eff':>7s} {'prompt':>7s} {'second':>7s} {'fake':>7s} "
                     f"{'dup':>7s} {'score':>7s}")
        for e in events:
            lines.append(f"  {e['event_id']:>10d} {_rate(e['efficiency'])} "
                         f"{_rate(e.get('efficiency_prompt'))} "
                         f"{_rate(e.get('efficiency_secondary'))} "
                         f"{_rate(e['fake_rate'])} {_rate(e['duplicate_rate'])} "
                         f"{_rate(e['trackml_score'])}")
    return "\n".join(lines)


def check_folders(args: argparse.Namespace) -> list[tuple[str, Path]]:
    """--tracks, --events and every --stage DIR exist (before the heavy imports); the
    ``--stage`` pairs."""
    from trkx.data.folders import require_folder

    require_folder(args.tracks, "--tracks", "folder of track files")
    require_folder(args.events, "--events", "events folder")
    return parse_stages(args.stage)


def run(args: argparse.Namespace) -> int:
    stages = check_folders(args)
    import pandas as pd
    from tqdm import tqdm

    from trkx.cli._tracks_io import (
        atomic_write,
        config_section,
        find_event_source,
        read_parameters,
        read_tracks,
        track_builder,
        track_files,
    )
    from trkx.config import naming_overrides
    from trkx.data.errors import TrackMLFormatError
    from trkx.tracks.anchors import ANCHOR_CUTS, anchor_evaluation, anchor_summary
    from trkx.tracks.binned import standard_rates
    from trkx.tracks.edge_metrics import edge_metrics, pool_edge_metrics
    from trkx.tracks.metrics import (
        MetricCuts,
        cuts_dict,
        evaluate_event,
        event_summary,
        overall_summary,
    )
    from trkx.tracks.parameters import parameters_file_name
    from trkx.tracks.plots import rate_figure, resolution_figure, track_length_figure
    from trkx.tracks.resolution import (
        format_resolution,
        matched_parameters,
        resolution_summary,
    )
    from trkx.tracks.summary_text import anchor_line, short_particles_line, vertex_z_line

    with naming_overrides(args.overrides, args.config or "--set"):   # a bad --set names it
        cuts = config_section(args.config, args.overrides, "metrics", MetricCuts,
                              args.config or "--set")
        builder = track_builder(args.config, args.overrides, args.checkpoint)
    edge_cut = args.edge_cut if args.edge_cut is not None else (
        builder.walk_cut if builder.method == "walkthrough" else builder.cc_cut)
    start = time.perf_counter()
    evaluations, anchor_evaluations, record_edges, matched = [], [], [], []
    for event_id, path in tqdm(sorted(track_files(args.tracks).items()), desc="evaluate",
                               unit="event"):
        truth, record, particle_table = load_truth(find_event_source(args.events, event_id),
                                                   event_id)
        try:
            submission = read_tracks(path, event_id)
            evaluations.append(evaluate_event(truth, submission, cuts))
            anchor_evaluations.append(anchor_evaluation(truth, submission))
        except TrackMLFormatError as exc:
            raise TrackMLFormatError(f"{path}: {exc}") from exc
        fitted = path.parent / parameters_file_name(event_id)
        if fitted.is_file():
            matched.append(matched_parameters(evaluations[-1], read_parameters(fitted),
                                              particle_table).assign(event_id=event_id))
        if record is not None:
            metrics = edge_metrics(record, edge_cut, cuts)
            if metrics is not None:
                record_edges.append({"event_id": event_id, **metrics})

    events = [event_summary(e) for e in evaluations]
    overall = overall_summary(evaluations)
    particles = pd.concat([e.particles.assign(event_id=e.event_id) for e in evaluations],
                          ignore_index=True)
    tracks = pd.concat([e.tracks.assign(event_id=e.event_id) for e in evaluations],
                       ignore_index=True)
    rates = standard_rates(particles, tracks, cuts.pt_min, cuts.max_eta, cuts.min_hits)
    edges = {}
    if record_edges:
        edges["events"] = {"overall": pool_edge_metrics(record_edges), "events": record_edges}
    for name, folder in stages:
        cut = edge_cut if name == "gnn" else 0.0  # earlier stages' records: all edges kept
        edges[name] = stage_edge_metrics(name, folder, cut, cuts)

    anchors = anchor_summary(anchor_evaluations)
    out = args.out
    report = {"cuts": cuts_dict(cuts), "overall": overall, "events": events,
              "anchors": {"cuts": cuts_dict(ANCHOR_CUTS), "overall": anchors},
              "binned": {name: rate.to_dict() for name, rate in rates.items()},
              "edges": edges}
    resolution = None
    if matched:
        fitted_rows = pd.concat(matched, ignore_index=True)
        resolution = resolution_summary(fitted_rows)
        report["resolution"] = resolution
    text = json.dumps(_json_safe(report), indent=2)
    atomic_write(out / "metrics.json", lambda tmp: tmp.write_text(text))
    atomic_write(out / "particles.csv", lambda tmp: particles.to_csv(tmp, index=False))
    atomic_write(out / "tracks.csv", lambda tmp: tracks.to_csv(tmp, index=False))
    if resolution is not None:
        atomic_write(out / "parameters.csv", lambda tmp: fitted_rows.to_csv(tmp, index=False))

    signal = f"pT >= {cuts.pt_min:g} GeV, >= {cuts.min_hits} hits" + (
        f", |eta| <= {cuts.max_eta:g}" if cuts.max_eta is not None else "")
    match = f"{cuts.matching.replace('_', ' ')} matching"
    figures = {
        "efficiency_vs_pt": rate_figure(
            rates["efficiency_vs_pt"], r"particle $p_T$ [GeV]", "tracking efficiency",
            "Efficiency vs $p_T$", log_x=True,
            note=f"particles with >= {cuts.min_hits} hits\n{match}"),
        "efficiency_vs_eta": rate_figure(
            rates["efficiency_vs_eta"], r"particle $\eta$", "tracking efficiency",
            r"Efficiency vs $\eta$", note=f"signal: {signal}\n{match}"),
        "efficiency_vs_particle_hits": rate_figure(
            rates["efficiency_vs_particle_hits"], "hits of the particle", "tracking efficiency",
            "Efficiency vs particle hits", note=f"signal: {signal}\n{match}"),
        "fake_rate_vs_eta": rate_figure(
            rates["fake_rate_vs_eta"], r"track $\eta$ (mean of hits)", "fake rate",
            r"Fake rate vs $\eta$", ylim=None,
            note=f"tracks with >= {cuts.min_track_hits} hits\n{match}"),
        "duplicate_rate_vs_eta": rate_figure(
            rates["duplicate_rate_vs_eta"], r"track $\eta$ (mean of hits)", "duplicate rate",
            r"Duplicate rate vs $\eta$", ylim=None,
            note=f"matched tracks with >= {cuts.min_track_hits} hits\n{match}"),
        "track_length": track_length_figure(tracks, particles),
    }
    if "efficiency_vs_production_radius" in rates:
        figures["efficiency_vs_production_radius"] = rate_figure(
            rates["efficiency_vs_production_radius"], "particle production radius [mm]",
            "tracking efficiency", "Efficiency vs production radius", log_x=True,
            note=f"signal: {signal}\nfirst bin: prompt (<= 1 mm)\n{match}")
    if "efficiency_vs_vertex_z" in rates:
        figures["efficiency_vs_vertex_z"] = rate_figure(
            rates["efficiency_vs_vertex_z"], "particle vertex |z| [mm]", "tracking efficiency",
            "Efficiency vs vertex |z|", note=f"signal: {signal}\n{match}")
    if resolution is not None:
        figures["pt_resolution"] = resolution_figure(fitted_rows)
    for name, figure in figures.items():
        atomic_write(out / f"{name}.png",
                     lambda tmp, f=figure: f.savefig(tmp, format="png", dpi=110))
    print(format_table(_json_safe(overall), _json_safe(events)))
    for line in (vertex_z_line(overall), short_particles_line(overall), anchor_line(anchors)):
        if line is not None:
            print("  " + line)
    if resolution is not None:
        print(format_resolution(resolution))
    for name, stage in edges.items():
        pooled = stage["overall"]
        if pooled:
            print(format_stage_edges(name, pooled))
    print(f"wrote {out / 'metrics.json'} and {len(figures)} plots in "
          f"{time.perf_counter() - start:.2f} s")
    return 0
