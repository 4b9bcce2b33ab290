"""``trkx infer [--config PIPELINE.yaml --checkpoints DIR] --events DIR --out DIR [--workers N]``.

Without ``--config``/``--checkpoints`` it runs the models shipped with trkx (:mod:`trkx.models`,
checked against their checksums first): on each event with a cells file the set that reads the
cluster shapes (``pu200_cells``, where shipped), on the others the hits-only set (``pu200``); the
summary line and ``timing.json`` (``models``, ``models_per_event``) say which ran.

Runs the trained pipeline on TrackML-format events (cells optional unless the models were
trained with cell features, truth optional) and writes to ``--out``: one
``eventNNNNNNNNN-tracks.csv`` per event (``event_id,hit_id,track_id``), beside it
``eventNNNNNNNNN-parameters.csv`` (each track's helix and quality:
trkx.tracks.builder.parameters) and
``timing.json`` (seconds per stage, throughput, device, precision, kernel, allocator, CPU
seconds, peak memory: trkx.pipeline.timing). With truth (or ``--evaluate``) the tracks are
evaluated as ``trkx evaluate`` does, in this process, into ``--out/evaluate`` (its plots with
``--plots``); events with
pixel truth only (event 21001) are scored on their pixel hits. ``--graphs DIR`` also writes
every stage's graph records to ``DIR/{embedding,filter,gnn}/`` (the evaluation then reports
each stage's edge efficiency). This is the one inference path: ``trkx run`` runs it too.

``--workers N > 1`` (throughput mode) runs the events in N spawned processes, each loading the
pipeline once and using ``max(1, T // N)`` torch threads, T the command's thread count
(``--threads`` / ``TRKX_THREADS``); ``--workers 1`` runs them in this process
(trkx.pipeline.batch; ``events_per_second`` excludes loading).

``--device auto|cpu|cuda`` (:mod:`trkx.runtime.device`; default ``auto``: CUDA when torch sees
it) is
where the networks, neighbour search, edge inputs and GNN run (what stays on the CPU:
:mod:`trkx.pipeline.inference`); ``cuda`` on a machine without CUDA is one line, exit 2.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from trkx.runtime.device import DEVICES


def add_pipeline_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("whole-pipeline inference (no STAGE given)")
    group.add_argument("--config", help="pipeline YAML of the models (e.g. configs/pu200.yaml; "
                       "default: the shipped models' own)")
    group.add_argument("--checkpoints", type=Path,
                       help="folder with embedding.pt, filter.pt, gnn.pt (WORKDIR/checkpoints; "
                            "default: the models shipped with trkx, trkx/models/pu200_cells on "
                            "events with cells, trkx/models/pu200 on the others)")
    group.add_argument("--events", type=Path, help="folder of TrackML events")
    group.add_argument("--out", type=Path, help="folder for tracks, timing.json, evaluation")
    group.add_argument("--n-events", type=int, default=None, metavar="N",
                       help="only the first N events")
    group.add_argument("--device", choices=DEVICES, default="auto",
                       help="where the models, neighbour search and GNN run: auto (default: "
                            "cuda when available, else cpu), cpu, or cuda (an error without "
                            "CUDA); track building and file I/O stay on the CPU. fp32 tracks "
                            "on cuda can differ from the CPU's in a few tracks")
    group.add_argument("--workers", type=int, default=1, metavar="N",
                       help="events in N parallel processes, each with max(1, threads // N) "
                            "threads (default 1: in this process)")
    group.add_argument("--set", dest="overrides", action="append", default=[],
                       metavar="KEY=VALUE", help="pipeline config override (repeatable)")
    group.add_argument("--graphs", type=Path, default=None, metavar="DIR",
                       help="also write each stage's graph records to DIR/{embedding,filter,"
                            "gnn}/ (with edge labels when the events have truth)")
    group.add_argument("--evaluate", action=argparse.BooleanOptionalAction, default=None,
                       help="evaluate the tracks as `trkx evaluate` does, into OUT/evaluate "
                            "(default: when every event has truth)")
    group.add_argument("--plots", action="store_true",
                       help="with the evaluation, also draw its plots (PNG) as `trkx evaluate` "
                            "does (matplotlib: ~3 s for one event's eight plots; without it "
                            "metrics.json and the tables)")


def run(args: argparse.Namespace) -> int:
    from trkx.pipeline.preflight import check_infer_inputs

    check_infer_inputs(args.events, args.out, args.config, args.checkpoints, args.workers,
                       args.graphs)
    from trkx.runtime.device import resolve_device

    device = resolve_device(args.device, "--device")   # `--device cuda` without CUDA: here
    from trkx.data.listing import event_prefixes
    from trkx.pipeline.batch import Outputs, infer_events
    from trkx.pipeline.config import load_pipeline_config
    from trkx.pipeline.model_sets import model_groups
    from trkx.pipeline.process_usage import reset_peak_memory
    from trkx.pipeline.timing import per_set, run_settings, summary_line, timing_report
    from trkx.tracks.files import atomic_write

    prefixes = event_prefixes(args.events)[: args.n_events]
    if not prefixes:
        raise FileNotFoundError(f"{args.events}: no TrackML events (event*-hits.csv[.gz])")
    groups = model_groups(args.config, args.checkpoints, prefixes)
    configs = [load_pipeline_config(g.config, args.overrides) for g in groups]
    out = Outputs(args.out, args.graphs)
    reset_peak_memory()              # this command's peak, not earlier steps of `trkx run`
    batch = infer_events(groups, prefixes, out, tuple(args.overrides), device, args.workers)
    results = batch.results
    settings = run_settings(device, *(per_set(groups, [getattr(c.inference, key)
                                                       for c in configs])
                                      for key in ("precision", "graph_ops")))
    report = timing_report(batch, groups, prefixes, settings, [c.inference for c in configs])
    text = json.dumps(report, indent=2)
    atomic_write(args.out / "timing.json", lambda tmp: tmp.write_text(text))
    print(summary_line(report, args.out, settings))
    from trkx.tracks.evaluate.projection import pixel_truth_file

    pixel = [(p, r) for p, r in zip(prefixes, results)
             if not r.has_truth and pixel_truth_file(p) is not None]
    evaluate = args.evaluate or (args.evaluate is None and all(r.has_truth for r in results))
    if args.evaluate is False or not (pixel or evaluate):
        return 0
    from trkx.pipeline.model_sets import evaluation_per_set

    cuts, edge_cut, sets = evaluation_per_set(groups, configs, batch.pipelines, {
        p: r.event_id for p, r in zip(prefixes, results)})
    if pixel:
        _evaluate_pixel_events(pixel, args.out / "evaluate", cuts, args.plots)
    if evaluate:
        _evaluate(args, cuts, edge_cut, sets)
    return 0


def _evaluate_pixel_events(pixel: list, out: Path, cuts, plots: bool) -> None:
    """Events with truth for their pixel hits only (``-truth-pixel``, e.g. the real event
    21001), ``(prefix, result)``: their tracks scored on the projection onto those hits
    (trkx.tracks.evaluate.projection), printed and written to ``out/pixel_truth.json``, and
    into ``out`` as ``trkx evaluate`` writes (metrics.json and the tables, the notebook's
    input; the plots with ``plots``) with ``"truth": "pixel hits"`` in metrics.json."""
    import pandas as pd

    from trkx.tracks.evaluate.evaluation import assemble_evaluation
    from trkx.tracks.evaluate.metrics import overall_summary
    from trkx.tracks.evaluate.projection import pixel_truth_evaluations
    from trkx.tracks.evaluate.report import write_evaluation
    from trkx.tracks.evaluate.summary_text import pixel_truth_text
    from trkx.tracks.files import atomic_write

    own, anchors = pixel_truth_evaluations(
        [(p, pd.read_csv(r.path), r.event_id) for p, r in pixel], cuts)
    report = {**overall_summary(own), "anchors": overall_summary(anchors)}
    text = json.dumps(report, indent=1, default=float)
    atomic_write(out / "pixel_truth.json", lambda tmp: tmp.write_text(text))
    evaluation = assemble_evaluation(own, anchors, cuts)
    evaluation.report["truth"] = "pixel hits (the tracks projected onto the hits with truth)"
    write_evaluation(evaluation, out, plots)
    print(pixel_truth_text(report, len(pixel), out / "pixel_truth.json"))


def _evaluate(args: argparse.Namespace, cuts, edge_cut: dict[int, float],
              sets: dict[int, str]) -> None:
    """The tracks evaluated in this process as ``trkx evaluate`` does, into OUT/evaluate, each
    event's edges at the cut of the set that made it (``sets``: each set's own figures too);
    the truth from the stage graphs when they were written (edge figures per stage too)."""
    from trkx.tracks.evaluate.evaluation import evaluate_tracks
    from trkx.tracks.evaluate.report import write_evaluation
    from trkx.tracks.evaluate.summary_text import evaluation_text

    graphs = args.graphs
    stages = [] if graphs is None else [(s, graphs / s) for s in ("embedding", "filter")]
    evaluation = evaluate_tracks(args.out, args.events if graphs is None else graphs / "gnn",
                                 cuts, edge_cut, stages, sets=sets)
    write_evaluation(evaluation, args.out / "evaluate", args.plots)
    print(evaluation_text(evaluation.report))
