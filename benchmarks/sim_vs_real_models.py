"""The same trained models on real events and on their simulated twins (used by
benchmarks/sim_vs_real.py with ``--checkpoints DIR --config PIPELINE.yaml``).

Every event runs whole through :meth:`trkx.pipeline.inference.TrainedPipeline.run` (all its
hits, with cells when the models use them). Truth is projected the same way on the real event
and on its twins:

* event 21001 and its twins: only the pixel hits with truth (volumes 7, 8, 9; on 21001 the
  99.7% whose truth was recovered) carry a particle; every other hit counts as noise for the
  edge labels, a signal particle has pT >= the models' signal pT and >= 3 such hits, and the
  tracks are projected onto the truth hits before double-majority matching;
* the sample event and its subsampled twins: full truth.

The measured hit position stands in for the true crossing (event 21001 has none) in the
truth-graph order of both. Per stage: the signal-edge efficiency (cumulative, at the stage's
cut) of :func:`physics_analysis.stage_edges`; tracks: the double-majority efficiency of
:func:`trkx.tracks.metrics.evaluate_event`. Gaps are absolute differences real - simulated.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from physics_analysis import StageGraphs, stage_edges
from torch_geometric.data import Data

from trkx.tracks.metrics import overall_summary
from trkx.tracks.projection import (
    PIXEL_VOLUMES,
    projected_evaluation,
    projected_record,
    read_tables,
)

STAGES = ("embedding", "filter", "gnn")


def record_of(tables: dict[str, pd.DataFrame], pipeline, volumes: tuple[int, ...] | None,
              event_id: int) -> tuple[Data, np.ndarray]:
    """The event record with projected truth, and the mask of the hits that carry truth."""
    return projected_record(tables, pipeline.use_cells, pipeline.signal_pt_min, volumes,
                            event_id)


def gnn_cut(pipeline) -> float:
    builder = pipeline.builder
    return builder.walk_cut if builder.method == "walkthrough" else builder.cc_cut


def run_events(pipeline, events: list[tuple[dict[str, pd.DataFrame], int]],
               volumes: tuple[int, ...] | None) -> dict:
    """Cumulative signal-edge efficiency per stage and track efficiency, pooled over
    ``events`` (``(tables, event_id)``)."""
    graphs: dict[str, list[Data]] = {s: [] for s in STAGES}
    evaluations = []
    for tables, event_id in events:
        record, mask = record_of(tables, pipeline, volumes, event_id)
        stage_graphs, labels, _ = pipeline.run(record, edge_labels=True)
        filtered = stage_graphs["filter"].clone()
        del filtered.scores                      # it holds only the edges it kept
        graphs["embedding"].append(stage_graphs["embedding"])
        graphs["filter"].append(filtered)
        graphs["gnn"].append(stage_graphs["gnn"])
        evaluations.append(projected_evaluation(record, mask, labels, event_id))
    stages = stage_edges([StageGraphs("embedding", graphs["embedding"], None),
                          StageGraphs("filter", graphs["filter"], None),
                          StageGraphs("gnn", graphs["gnn"], gnn_cut(pipeline))])
    tracks = overall_summary(evaluations)
    return {"stage_efficiency": {s: stages[s]["efficiency"] for s in STAGES},
            "signal_edges": stages["embedding"]["n_signal_truth_edges"],
            "track_efficiency": tracks["efficiency"],
            "track_efficiency_err": tracks["efficiency_err"],
            "fake_rate": tracks["fake_rate"], "signal_particles": tracks["n_signal_particles"]}


def read_event(prefix: Path, truth_part: str) -> dict[str, pd.DataFrame]:
    return read_tables(prefix, truth_part, cells=True)


def sample_twin_tables(tables: dict[str, pd.DataFrame], hit_ids: np.ndarray,
                       particle_ids: np.ndarray) -> dict[str, pd.DataFrame]:
    """A simulated event cut down to the hits and particles of its subsampled view."""
    keep = tables["hits"]["hit_id"].isin(hit_ids)
    return {"hits": tables["hits"][keep].reset_index(drop=True),
            "cells": tables["cells"][tables["cells"]["hit_id"].isin(hit_ids)],
            "particles": tables["particles"][tables["particles"]["particle_id"]
                                             .isin(particle_ids)].reset_index(drop=True),
            "truth": tables["truth"][tables["truth"]["hit_id"].isin(hit_ids)]}


def model_gaps(config: Path, checkpoints: Path, data: Path,
               events: list[dict[str, pd.DataFrame]], sample_twins: list,
               first_event_id: int) -> dict:
    """Per-stage and track efficiencies of the models on the real events and their twins,
    and their absolute gaps (the JSON keys of benchmarks/sim_vs_real.py)."""
    from trkx.pipeline.inference import TrainedPipeline

    pipeline = TrainedPipeline.load(config, checkpoints)
    real = run_events(pipeline, [(read_event(data / "real_pixel_truth/event000021001",
                                             "truth-pixel"), 21001)], PIXEL_VOLUMES)
    twins = run_events(pipeline, [(t, first_event_id + i) for i, t in enumerate(events)],
                       PIXEL_VOLUMES)
    sample = run_events(pipeline, [(read_event(data / "sample_event/event000000001",
                                               "truth"), 1)], None)
    sample_sim = run_events(pipeline, [
        (sample_twin_tables(t, view.hits["hit_id"].to_numpy(),
                            view.particles["particle_id"].to_numpy()), first_event_id + i)
        for i, (t, view) in enumerate(zip(events, sample_twins))], None)
    return {
        "models": {"config": str(config), "checkpoints": str(checkpoints),
                   "event21001": real, "event21001_twins": twins,
                   "sample": sample, "sample_twins": sample_sim},
        "stage_efficiency_gap": {s: abs(real["stage_efficiency"][s]
                                        - twins["stage_efficiency"][s]) for s in STAGES},
        "track_efficiency_gap": abs(real["track_efficiency"] - twins["track_efficiency"]),
        "sample_track_efficiency_gap": abs(sample["track_efficiency"]
                                           - sample_sim["track_efficiency"]),
    }
