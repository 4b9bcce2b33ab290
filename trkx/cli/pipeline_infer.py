"""``trkx infer [--config PIPELINE.yaml --checkpoints DIR] --events DIR --out DIR [--workers N]``.

Without ``--config``/``--checkpoints`` it runs the models shipped with trkx (:mod:`trkx.models`,
checked against their checksums first): on each event with a cells file the set that reads the
cluster shapes (``pu200_cells``, where shipped), on the others the hits-only set (``pu200``); the
summary line and ``timing.json`` (``models``, ``models_per_event``) say which ran.

Runs the trained pipeline on TrackML-format events (cells optional unless the models were
trained with cell features, truth optional): one ``eventNNNNNNNNN-tracks.csv`` per event (the
challenge's ``event_id,hit_id,track_id``), beside it ``eventNNNNNNNNN-parameters.csv`` (each
track's helix parameters, fit quality and quality score: trkx.tracks.parameters), and
``timing.json`` (seconds per stage per event, the throughput of the run, the device, precision
and GNN kernel used, the memory allocator, the process's user and system CPU seconds and its
peak resident memory from the command's start, ``peak_memory_gb``) in
``--out``;
when the events carry truth (or with ``--evaluate``), ``trkx evaluate`` runs on the result
into ``--out/evaluate``. ``--graphs DIR`` also writes the graph record of every stage to
``DIR/{embedding,filter,gnn}/`` (edge labels when there is truth; the evaluation then reports
each stage's edge efficiency). This is the one inference path:
``trkx run`` runs this command on its test events.

``--workers N > 1`` (throughput mode) runs the events in N spawned processes, each loading the
pipeline once and using ``max(1, T // N)`` torch threads, T the command's thread count
(``--threads`` / ``TRKX_THREADS``). ``--workers 1`` runs them in this process, as before. Either
way ``events_per_second = events / wall_seconds``, where ``wall_seconds`` runs from the moment
the first pipeline is loaded and ready to the last event's tracks written (loading is excluded;
the start times of workers are compared on ``time.monotonic``, one clock for all processes).

``--device auto|cpu|cuda`` (:mod:`trkx.device`; default ``auto``: CUDA when torch sees it) is
where the networks, neighbour search, edge inputs and GNN run (what stays on the CPU:
:mod:`trkx.pipeline.inference`); ``cuda`` on a machine without CUDA is one line, exit 2.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trkx import allocator
from trkx.cli._process_usage import peak_memory_gb, process_cpu_seconds, reset_peak_memory
from trkx.config import ConfigError
from trkx.device import DEVICES
from trkx.pipeline.model_sets import describe, model_groups

if TYPE_CHECKING:
    from trkx.pipeline.inference import TrainedPipeline


STAGES: tuple[str, ...] = ("embedding", "filter", "gnn")


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
                       help="run `trkx evaluate` into OUT/evaluate (default: when every event "
                            "has truth)")


@dataclass(frozen=True)
class PipelineSource:
    """Everything needed to load the trained pipeline (picklable, so a worker loads its own)."""

    config: Path
    checkpoints: Path
    overrides: tuple[str, ...]
    device: str = "auto"          # resolved by the parent: cpu or cuda

    def load(self) -> TrainedPipeline:
        from trkx.pipeline.inference import TrainedPipeline

        return TrainedPipeline.load(self.config, self.checkpoints, self.overrides, self.device)


@dataclass(frozen=True)
class Outputs:
    """Where one run writes: tracks (and timing, evaluation) to ``tracks``; with ``graphs``,
    the graph record of every stage to ``graphs/STAGE/eventNNNNNNNNN.pt``."""

    tracks: Path
    graphs: Path | None = None

    def graph_path(self, stage: str, event_id: int) -> Path:
        from trkx.stage_tools import output_path

        assert self.graphs is not None
        return output_path(event_id, self.graphs / stage)


@dataclass(frozen=True)
class EventResult:
    """One event's outcome: its tracks file, seconds per stage, and whether it has truth."""

    event_id: int
    path: Path
    seconds: dict[str, float]
    has_truth: bool


def infer_event(pipeline: TrainedPipeline, detector: Any, prefix: str, out: Outputs,
                ) -> EventResult:
    """One event through the engine (trkx.pipeline.reconstruct); its tracks file and track
    parameters written atomically (and the stage graphs when ``out.graphs`` is set)."""
    from trkx.cli._tracks_io import atomic_write, tracks_file_name
    from trkx.data.errors import EventFileNotFoundError
    from trkx.data.io import find_part_file
    from trkx.data.record import save_record
    from trkx.pipeline.reconstruct import reconstruct_event
    from trkx.tracks.parameters import parameters_file_name

    try:
        find_part_file(prefix, "truth")
        has_truth = True
    except EventFileNotFoundError:
        has_truth = False
    event = reconstruct_event(pipeline, detector, prefix, graphs_with_truth=out.graphs
                              is not None)
    start = time.perf_counter()
    path = atomic_write(out.tracks / tracks_file_name(event.event_id),
                        lambda tmp: event.tracks.to_csv(tmp, index=False))
    atomic_write(out.tracks / parameters_file_name(event.event_id),
                 lambda tmp: event.parameters.to_csv(tmp, index=False))
    seconds = {**event.seconds, "write": time.perf_counter() - start}
    if out.graphs is not None:
        for stage, graph in event.graphs.items():
            save_record(graph, out.graph_path(stage, event.event_id))
    return EventResult(event.event_id, path, {**seconds, "total": sum(seconds.values()),
                                              "n_hits": event.n_hits}, has_truth)


#: A worker's pipeline, detector, start time and threads, or the error loading them raised.
_WORKER: dict[str, Any] = {}


def _init_worker(source: PipelineSource, threads: int) -> None:
    """Pool initializer: set this worker's threads, load the pipeline once. A loading error is
    kept and raised by the first event, so the parent reports it like any other error."""
    from trkx.threads import configure_threads

    configure_threads(threads)
    try:
        import torch

        from trkx.data.detector import load_detector

        _WORKER.update(pipeline=source.load(), detector=load_detector(),
                       threads=torch.get_num_threads(), ready=time.monotonic())
    except Exception as exc:  # re-raised in the parent through the first event's future
        _WORKER["error"] = exc


def _worker_event(prefix: str, out: Outputs) -> tuple[EventResult, float, int]:
    if "error" in _WORKER:
        raise _WORKER["error"]
    return (infer_event(_WORKER["pipeline"], _WORKER["detector"], prefix, out),
            _WORKER["ready"], _WORKER["threads"])


def run_in_process(source: PipelineSource, prefixes: list[str], out: Outputs, bar: Any,
                   ) -> tuple[list[EventResult], float, int]:
    """Events one after another here: (results in order, wall seconds, torch threads)."""
    import torch

    from trkx.data.detector import load_detector

    pipeline, detector = source.load(), load_detector()
    start = time.monotonic()
    results = []
    for prefix in prefixes:
        results.append(infer_event(pipeline, detector, prefix, out))
        bar.update(1)
    return results, time.monotonic() - start, torch.get_num_threads()


def run_in_workers(source: PipelineSource, prefixes: list[str], out: Outputs, bar: Any,
                   workers: int, threads: int) -> tuple[list[EventResult], float, int]:
    """Events in ``workers`` spawned processes of ``threads`` threads each: (results in the
    order of ``prefixes``, wall seconds from the first worker ready, threads per worker). An
    error or Ctrl-C drops the queued events, stops the workers and removes the temporary file
    of an event cut short."""
    from concurrent.futures import as_completed

    from trkx.parallel import worker_pool

    try:
        with worker_pool(workers, _init_worker, (source, threads), context="spawn") as pool:
            futures = {pool.submit(_worker_event, prefix, out): i
                       for i, prefix in enumerate(prefixes)}
            done: dict[int, tuple[EventResult, float, int]] = {}
            for future in as_completed(futures):
                done[futures[future]] = future.result()
                bar.update(1)
            end = time.monotonic()
    except BaseException:
        for tmp in out.tracks.glob(".event*-tracks.csv.*.tmp"):   # atomic_write's temporary files
            tmp.unlink(missing_ok=True)
        raise
    start = min(ready for _, ready, _ in done.values())
    return ([done[i][0] for i in range(len(prefixes))], end - start,
            max(n for _, _, n in done.values()))


def run_settings(device: Any, precision: str, graph_ops: str) -> dict[str, str | None]:
    """What a run was made with, in the order of the summary line and as ``timing.json``'s
    top-level keys: ``device`` (cpu, cuda:I), ``gpu`` (its name; None on the CPU),
    ``precision``, ``graph_ops``, ``allocator``. A new choice of the run goes here once."""
    from trkx.device import device_label, gpu_name

    return {"device": device_label(device), "gpu": gpu_name(device), "precision": precision,
            "graph_ops": graph_ops, "allocator": allocator.active()}


def _origin_text(summary: dict) -> str:
    """`` (prompt E of N, secondary E of N)`` when the summary splits by origin."""
    if "efficiency_prompt" not in summary:
        return ""
    rate = lambda v: "n/a" if v is None or v != v else f"{v:.3f}"
    return (f" (prompt {rate(summary['efficiency_prompt'])} of {summary['n_signal_prompt']}, "
            f"secondary {rate(summary['efficiency_secondary'])} of "
            f"{summary['n_signal_secondary']})")


def evaluate_pixel_events(prefixes: list[str], results: list[EventResult], out: Path,
                          tracks_config: Path) -> None:
    """Events with truth for their pixel hits only (``-truth-pixel``, e.g. the real event
    21001): their tracks scored on the projection onto those hits (trkx.tracks.projection),
    printed and written to ``out/pixel_truth.json``."""
    import pandas as pd

    from trkx.cli._tracks_io import atomic_write
    from trkx.config import instantiate, load_config, section
    from trkx.tracks.anchors import ANCHOR_CUTS, anchor_summary
    from trkx.tracks.metrics import MetricCuts, overall_summary
    from trkx.tracks.projection import pixel_truth_file, pixel_truth_labels, projected_evaluation
    from trkx.tracks.summary_text import anchor_line, short_particles_line, vertex_z_line

    pixel = [(p, r) for p, r in zip(prefixes, results)
             if not r.has_truth and pixel_truth_file(p) is not None]
    if not pixel:
        return
    cuts = instantiate(MetricCuts, section(load_config(tracks_config), "metrics",
                                           str(tracks_config)), f"{tracks_config}: metrics")
    evaluations, anchor_evaluations = [], []
    for prefix, result in pixel:   # the event read once, counted both ways
        record, mask, labels = pixel_truth_labels(prefix, pd.read_csv(result.path),
                                                  result.event_id, cuts.pt_min)
        evaluations.append(projected_evaluation(record, mask, labels, result.event_id, cuts))
        anchor_evaluations.append(projected_evaluation(record, mask, labels, result.event_id,
                                                       ANCHOR_CUTS))
    summary = overall_summary(evaluations)
    anchors = anchor_summary(anchor_evaluations)
    out.mkdir(parents=True, exist_ok=True)
    text = json.dumps({**summary, "anchors": anchors}, indent=1, default=float)
    atomic_write(out / "pixel_truth.json", lambda tmp: tmp.write_text(text))
    err = summary.get("efficiency_err") or 0.0
    print(f"pixel truth ({len(pixel)} event(s), tracks projected onto the hits with truth): "
          f"efficiency {summary['efficiency']:.3f} +- {err:.3f} of "
          f"{summary['n_signal_particles']} signal particles{_origin_text(summary)}, fake rate "
          f"{summary['fake_rate'] or 0.0:.3f}, duplicate rate "
          f"{summary['duplicate_rate'] or 0.0:.3f} -> {out / 'pixel_truth.json'}")
    for line in (vertex_z_line(summary), short_particles_line(summary), anchor_line(anchors)):
        if line is not None:
            print("  " + line)


def run(args: argparse.Namespace) -> int:
    missing = [f"--{name}" for name in ("events", "out") if getattr(args, name) is None]
    if missing:
        raise ConfigError(f"trkx infer needs a STAGE, or {', '.join(missing)} for the whole "
                          "pipeline")
    if (args.config is None) != (args.checkpoints is None):
        given, other = ("--config", "--checkpoints") if args.checkpoints is None else \
            ("--checkpoints", "--config")
        raise ConfigError(f"trkx infer: {given} needs {other} too (or give neither: the "
                          "models shipped with trkx)")
    if args.workers < 1:
        raise ConfigError(f"--workers must be >= 1, got {args.workers} (1: events in this "
                          "process, N > 1: N parallel processes)")
    from trkx.pipeline.preflight import check_checkpoints, check_infer_inputs

    check_infer_inputs(args.events, args.checkpoints)     # before the heavy imports below
    from trkx.device import resolve_device

    device = resolve_device(args.device, "--device")   # `--device cuda` without CUDA: here
    from tqdm import tqdm

    from trkx.cli import main as trkx_main
    from trkx.cli._tracks_io import TRACKS_FILE, atomic_write
    from trkx.data.listing import event_prefixes
    from trkx.pipeline.config import load_pipeline_config
    from trkx.pipeline.inference import checkpoint_paths
    from trkx.stage_tools import remove_stale
    from trkx.threads import choose_threads
    from trkx.tracks.parameters import PARAMETERS_FILE, parameters_file_name

    if not args.events.is_dir():
        raise FileNotFoundError(f"{args.events}: no such events folder")
    prefixes = event_prefixes(args.events)[: args.n_events]
    if not prefixes:
        raise FileNotFoundError(f"{args.events}: no TrackML events (event*-hits.csv[.gz])")
    groups = model_groups(args.config, args.checkpoints, prefixes)
    for _, config_path, checkpoints, _ in groups:        # every file fails before any event
        load_pipeline_config(config_path, args.overrides)
        check_checkpoints(checkpoint_paths(checkpoints))
    config = load_pipeline_config(groups[0][1], args.overrides)
    tracks_config = config.stage_config_path(config.tracks)
    gnn_checkpoint = checkpoint_paths(groups[0][2])["gnn"]
    out = Outputs(args.out, args.graphs)
    reset_peak_memory()              # this command's peak, not earlier steps of `trkx run`
    by_prefix: dict[str, EventResult] = {}
    wall, threads, workers_used = 0.0, 1, 1
    with tqdm(total=len(prefixes), desc="trkx infer", unit="event") as bar:
        for _, config_path, checkpoints, events in groups:
            source = PipelineSource(config_path, checkpoints, tuple(args.overrides),
                                    device.type)
            workers = min(args.workers, len(events))   # no idle process per missing event
            if workers == 1:
                results, seconds, threads = run_in_process(source, events, out, bar)
            else:
                results, seconds, threads = run_in_workers(
                    source, events, out, bar, workers, max(1, choose_threads(None) // workers))
            by_prefix.update(zip(events, results))
            wall += seconds
            workers_used = max(workers_used, workers)
    results = [by_prefix[p] for p in prefixes]
    workers = workers_used
    models = {str(by_prefix[p].event_id): name for name, _, _, events in groups
              for p in events} if groups[0][0] is not None else None
    remove_stale(args.out, [r.path for r in results], TRACKS_FILE)
    remove_stale(args.out, [r.path.parent / parameters_file_name(r.event_id) for r in results],
                 PARAMETERS_FILE)
    if args.graphs is not None:
        for stage in STAGES:
            remove_stale(args.graphs / stage, [out.graph_path(stage, r.event_id)
                                               for r in results])
    timing = {str(r.event_id): r.seconds for r in results}
    stages = ["load", "embedding", "graph", "filter", "gnn", "tracks", "parameters", "write",
              "total"]
    mean = {s: sum(t[s] for t in timing.values()) / len(timing) for s in stages}
    rate = len(results) / wall if wall > 0 else float("inf")
    cpu, peak = process_cpu_seconds(), peak_memory_gb()
    settings = run_settings(device, config.inference.precision, config.inference.graph_ops)
    if models is not None:      # the shipped sets, chosen per event (with or without cells)
        settings["models"] = describe(groups)
    text = json.dumps({**settings, "models_per_event": models, "cpu_seconds": cpu,
                       "events": timing, "mean_seconds": mean, "workers": workers,
                       "threads_per_worker": threads, "wall_seconds": wall,
                       "events_per_second": rate, "peak_memory_gb": peak}, indent=2)
    atomic_write(args.out / "timing.json", lambda tmp: tmp.write_text(text))
    print(f"{len(timing)} event(s) -> {args.out}; {rate:.2f} events/s with {workers} "
          f"worker(s) of {threads} thread(s); mean seconds per event: "
          + ", ".join(f"{s} {mean[s]:.2f}" for s in stages)
          + " (" + ", ".join(f"{key} {value}" for key, value in settings.items()
                             if value is not None)
          + f"; process CPU user {cpu['user']:.1f} s, system {cpu['system']:.1f} s; peak "
          f"memory {peak:.2f} GB)")
    if args.evaluate is not False:
        evaluate_pixel_events(prefixes, results, args.out / "evaluate", tracks_config)
    evaluate = args.evaluate if args.evaluate is not None else all(r.has_truth for r in results)
    if not evaluate:
        return 0
    # Truth from the stage graphs when they were written (edge figures per stage too).
    events = args.events if args.graphs is None else args.graphs / "gnn"
    stages = ([] if args.graphs is None else
              [item for stage in ("embedding", "filter")
               for item in ("--stage", f"{stage}={args.graphs / stage}")])
    return trkx_main(["evaluate", "--tracks", str(args.out), "--events", str(events),
                      "--out", str(args.out / "evaluate"), "--config", str(tracks_config),
                      "--checkpoint", str(gnn_checkpoint),   # the builder's working point
                      *(item for o in config.tracks.overrides for item in ("--set", o)),
                      *stages])
