"""The timing report of a ``trkx infer`` run: ``timing.json`` and its summary line.

Per event the seconds of each stage (``load`` the event files, ``embedding``, ``graph`` the
neighbour search, ``filter``, ``gnn``, ``tracks`` the builder, ``parameters`` the helix table,
``write`` the files, ``total`` their sum) and the hit count; over the run their means, the
throughput (trkx.pipeline.batch), what the run was made with (:func:`run_settings`), the
process's user and system CPU seconds and its peak resident memory since the command started
(trkx.pipeline.process_usage).
"""

from __future__ import annotations

from typing import Any

import torch

from trkx.pipeline.batch import BatchResult

#: The stages of the report, in the order of the summary line.
STAGES: tuple[str, ...] = ("load", "embedding", "graph", "filter", "gnn", "tracks",
                           "parameters", "write", "total")


def run_settings(device: torch.device, precision: str, graph_ops: str) -> dict[str, str | None]:
    """What a run was made with, in the order of the summary line and as ``timing.json``'s
    top-level keys: ``device`` (cpu, cuda:I), ``gpu`` (its name; None on the CPU),
    ``precision``, ``graph_ops``, ``allocator``. A new choice of the run goes here once."""
    from trkx.runtime import allocator
    from trkx.runtime.device import device_label, gpu_name

    return {"device": device_label(device), "gpu": gpu_name(device), "precision": precision,
            "graph_ops": graph_ops, "allocator": allocator.active()}


def per_set(groups: list, values: list[str]) -> str:
    """One setting of the run: the value all model sets share, else each set's
    (``pu200_cells fp32, pu200 bf16``)."""
    if len(set(values)) == 1:
        return values[0]
    return ", ".join(f"{g.name} {v}" for g, v in zip(groups, values))


def timing_report(batch: BatchResult, groups: list, prefixes: list[str],
                  settings: dict[str, Any], inference: list | None = None) -> dict[str, Any]:
    """``timing.json`` of a run (module docstring) of the model sets ``groups``
    (trkx.pipeline.model_sets) on the events ``prefixes``; with the shipped sets, ``models``
    (which ran, on how many events) joins ``settings``, ``models_per_event`` says which
    set ran on each event and ``sets`` gives each set's events, precision, graph ops
    (``inference``: each set's inference plan) and mean seconds over its own events."""
    from trkx.pipeline.model_sets import describe
    from trkx.pipeline.process_usage import (
        own_peak_memory_gb,
        peak_memory_gb,
        process_cpu_seconds,
    )

    models_per_event = None
    if groups[0].name is not None:
        settings["models"] = describe(groups)
        result_of = dict(zip(prefixes, batch.results))
        models_per_event = {str(result_of[p].event_id): g.name for g in groups for p in g.events}

    events = {str(r.event_id): r.seconds for r in batch.results}
    mean = {s: sum(t[s] for t in events.values()) / len(events) for s in STAGES}
    sets = None
    if models_per_event is not None:
        sets = {}
        for i, group in enumerate(groups):
            own = [t for e, t in events.items() if models_per_event[e] == group.name]
            sets[group.name] = {
                "events": len(own),
                **({"precision": inference[i].precision, "graph_ops": inference[i].graph_ops}
                   if inference else {}),
                "mean_seconds": {s: sum(t[s] for t in own) / len(own) for s in STAGES}}
    return {**settings, "models_per_event": models_per_event, "sets": sets,
            "cpu_seconds": process_cpu_seconds(), "events": events, "mean_seconds": mean,
            "workers": batch.workers, "threads_per_worker": batch.threads,
            "wall_seconds": batch.wall_seconds, "events_per_second": batch.events_per_second,
            # with workers, this process's own peak plus the workers' (they run side by side)
            "peak_memory_gb": (own_peak_memory_gb() + batch.workers_memory_gb
                               if batch.workers_memory_gb else peak_memory_gb())}


def summary_line(report: dict[str, Any], out: Any, settings: dict[str, Any]) -> str:
    """The line ``trkx infer`` prints of its ``timing.json``."""
    mean, cpu = report["mean_seconds"], report["cpu_seconds"]
    return (f"{len(report['events'])} event(s) -> {out}; {report['events_per_second']:.2f} "
            f"events/s with {report['workers']} worker(s) of {report['threads_per_worker']} "
            "thread(s); mean seconds per event: "
            + ", ".join(f"{s} {mean[s]:.2f}" for s in STAGES)
            + " (" + ", ".join(f"{key} {value}" for key, value in settings.items()
                               if value is not None)
            + f"; process CPU user {cpu['user']:.1f} s, system {cpu['system']:.1f} s; peak "
            f"memory {report['peak_memory_gb']:.2f} GB)")
