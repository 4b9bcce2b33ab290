"""Many events through the trained pipeline: the batch engine of ``trkx infer``.

:func:`infer_events` runs each model set (trkx.pipeline.model_sets) on its events, in this
process or in ``workers`` spawned processes that each load the pipeline once and use ``threads``
torch threads, and writes per event the tracks (``eventNNNNNNNNN-tracks.csv``), the track
parameters (``eventNNNNNNNNN-parameters.csv``) and, with :attr:`Outputs.graphs`, the graph
record of every stage. Throughput is measured from the moment the first pipeline is loaded and
ready to the last event's tracks written (loading excluded; the start times of workers are
compared on ``time.monotonic``, one clock for all processes):

    events_per_second = events / wall_seconds.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from trkx.stage_names import LEARNED_STAGES

#: The stages whose graph records :class:`Outputs` can hold.
STAGES = LEARNED_STAGES

if TYPE_CHECKING:
    from trkx.pipeline.inference import TrainedPipeline
    from trkx.pipeline.model_sets import ModelGroup


@dataclass(frozen=True)
class PipelineSource:
    """Everything needed to load the trained pipeline (picklable, so a worker loads its own)."""

    config: Path
    checkpoints: Path
    overrides: tuple[str, ...]
    device: torch.device

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
        from trkx.data.listing import output_path

        assert self.graphs is not None
        return output_path(event_id, self.graphs / stage)


@dataclass(frozen=True)
class EventResult:
    """One event's outcome: its tracks file, seconds per stage, and whether it has truth."""

    event_id: int
    path: Path
    seconds: dict[str, float]
    has_truth: bool


@dataclass(frozen=True)
class BatchResult:
    """The events' results in the order given, the wall seconds of the inference (loading
    excluded), the torch threads per process, the most processes used at once, and each model
    set's pipeline where it was loaded in this process (None where workers loaded it)."""

    results: list[EventResult]
    wall_seconds: float
    threads: int
    workers: int
    pipelines: list[TrainedPipeline | None]
    #: GiB: the sum over the worker processes of each one's peak resident memory (0 when the
    #: events ran in this process); they run side by side, so their peaks add up
    workers_memory_gb: float = 0.0

    @property
    def events_per_second(self) -> float:
        return len(self.results) / self.wall_seconds if self.wall_seconds > 0 else float("inf")


def infer_event(pipeline: TrainedPipeline, detector: Any, prefix: str, out: Outputs,
                ) -> EventResult:
    """One event through the engine (trkx.pipeline.reconstruct); its tracks file and track
    parameters written atomically (and the stage graphs when ``out.graphs`` is set)."""
    from trkx.data.io import find_part_file
    from trkx.data.record import save_record
    from trkx.files.errors import EventFileNotFoundError
    from trkx.tracks.builder.parameters import parameters_file_name
    from trkx.tracks.files import atomic_write, tracks_file_name

    try:
        find_part_file(prefix, "truth")
        has_truth = True
    except EventFileNotFoundError:
        has_truth = False
    event = pipeline.event_tracks(detector, prefix, graphs_with_truth=out.graphs is not None)
    start = time.perf_counter()
    # the parameters first: an event interrupted between the two has no tracks file, the one
    # every reader (trkx evaluate, trkx score) takes as the event's result
    atomic_write(out.tracks / parameters_file_name(event.event_id),
                 lambda tmp: event.parameters.to_csv(tmp, index=False))
    path = atomic_write(out.tracks / tracks_file_name(event.event_id),
                        lambda tmp: event.tracks.to_csv(tmp, index=False))
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
    from trkx.runtime.threads import configure_threads

    configure_threads(threads)
    try:
        from trkx.data.detector import load_detector

        _WORKER.update(pipeline=source.load(), detector=load_detector(),
                       threads=torch.get_num_threads(), ready=time.monotonic())
    except Exception as exc:  # re-raised in the parent through the first event's future
        _WORKER["error"] = exc


def _worker_event(prefix: str, out: Outputs) -> tuple[EventResult, float, int, int, float]:
    """One event in a worker: its result, the worker's ready time and threads, its process id
    and its peak resident memory so far (GiB)."""
    import os

    from trkx.pipeline.process_usage import own_peak_memory_gb

    if "error" in _WORKER:
        raise _WORKER["error"]
    result = infer_event(_WORKER["pipeline"], _WORKER["detector"], prefix, out)
    return result, _WORKER["ready"], _WORKER["threads"], os.getpid(), own_peak_memory_gb()


def run_in_process(pipeline: TrainedPipeline, prefixes: list[str], out: Outputs, bar: Any,
                   ) -> tuple[list[EventResult], float, int]:
    """Events one after another here with the loaded ``pipeline``: (results in order, wall
    seconds, torch threads)."""
    from trkx.data.detector import load_detector

    detector = load_detector()
    start = time.monotonic()
    results = []
    for prefix in prefixes:
        results.append(infer_event(pipeline, detector, prefix, out))
        bar.update(1)
    return results, time.monotonic() - start, torch.get_num_threads()


def run_in_workers(source: PipelineSource, prefixes: list[str], out: Outputs, bar: Any,
                   workers: int, threads: int,
                   ) -> tuple[list[EventResult], float, int, float]:
    """Events in ``workers`` spawned processes of ``threads`` threads each: (results in the
    order of ``prefixes``, wall seconds from the first worker ready, threads per worker, the
    sum of the workers' peak memory in GiB). An error or Ctrl-C drops the queued events, stops
    the workers and removes the temporary file of an event cut short."""
    from concurrent.futures import as_completed

    from trkx.runtime.parallel import worker_pool

    try:
        with worker_pool(workers, _init_worker, (source, threads), context="spawn",
                         end_when_done=True) as pool:   # every result is in hand at its end
            futures = {pool.submit(_worker_event, prefix, out): i
                       for i, prefix in enumerate(prefixes)}
            done: dict[int, tuple[EventResult, float, int, int, float]] = {}
            for future in as_completed(futures):
                done[futures[future]] = future.result()
                bar.update(1)
            end = time.monotonic()
    except BaseException:   # atomic_write's temporary files: tracks, parameters, graphs
        remove_temporaries(out)
        raise
    start = min(item[1] for item in done.values())
    peaks: dict[int, float] = {}
    for _, _, _, pid, peak in done.values():
        peaks[pid] = max(peaks.get(pid, 0.0), peak)
    return ([done[i][0] for i in range(len(prefixes))], end - start,
            max(item[2] for item in done.values()), sum(peaks.values()))


def remove_temporaries(out: Outputs) -> int:
    """Remove the temporary files of atomic writes (``.event*.tmp``) from the output folders:
    those of workers stopped by an error, or of an earlier run that was killed; how many."""
    folders = [out.tracks] + ([out.graphs / stage for stage in STAGES]
                              if out.graphs is not None else [])
    removed = 0
    for folder in folders:
        for tmp in folder.glob(".event*.tmp"):
            tmp.unlink(missing_ok=True)
            removed += 1
    return removed


def infer_events(groups: list[ModelGroup], prefixes: list[str], out: Outputs,
                 overrides: tuple[str, ...], device: torch.device, workers: int,
                 progress: bool = True) -> BatchResult:
    """Every model set on its events, ``workers`` processes at most (never more than a set's
    events); the results in ``prefixes``' order. Before any event runs, every set is loaded here
    (when its events run in this process) or its checkpoints verified (when workers load it):
    each checkpoint is read once per process, and a bad file fails before the first event.
    Files of other events left in the output folders by an earlier run are removed, and the
    temporary files of a run that was killed."""
    from tqdm import tqdm

    from trkx.data.listing import remove_stale
    from trkx.pipeline.inference import checkpoint_paths
    from trkx.pipeline.preflight import check_checkpoints
    from trkx.runtime.threads import choose_threads
    from trkx.tracks.builder.parameters import PARAMETERS_FILE, parameters_file_name
    from trkx.tracks.files import TRACKS_FILE

    plans = []
    for group in groups:
        source = PipelineSource(group.config, group.checkpoints, overrides, device)
        n = min(workers, len(group.events))
        if n == 1:
            plans.append((group, source, n, source.load()))
        else:
            check_checkpoints(checkpoint_paths(group.checkpoints))
            plans.append((group, source, n, None))
    remove_temporaries(out)         # a killed run's half-written files
    by_prefix: dict[str, EventResult] = {}
    wall, threads, used, workers_memory = 0.0, 1, 1, 0.0
    with tqdm(total=len(prefixes), desc="trkx infer", unit="event", disable=not progress) as bar:
        for group, source, n, pipeline in plans:
            if pipeline is not None:
                results, seconds, threads = run_in_process(pipeline, group.events, out, bar)
            else:
                results, seconds, threads, memory = run_in_workers(
                    source, group.events, out, bar, n, max(1, choose_threads(None) // n))
                workers_memory = max(workers_memory, memory)
            by_prefix.update(zip(group.events, results))
            wall += seconds
            used = max(used, n)
    results = [by_prefix[p] for p in prefixes]
    remove_stale(out.tracks, [r.path for r in results], TRACKS_FILE)
    remove_stale(out.tracks, [r.path.parent / parameters_file_name(r.event_id)
                              for r in results], PARAMETERS_FILE)
    if out.graphs is not None:
        for stage in STAGES:
            remove_stale(out.graphs / stage, [out.graph_path(stage, r.event_id)
                                              for r in results])
    return BatchResult(results, wall, threads, used, [plan[3] for plan in plans],
                       workers_memory)
