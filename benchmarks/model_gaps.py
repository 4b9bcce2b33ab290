"""The models on the real events and on their simulated twins (used by benchmarks/sim_vs_real.py
``--checkpoints DIR --config PIPELINE.yaml``): :func:`model_gaps` gives the per-stage
signal-edge efficiency, track efficiency and fake rate on the real events (``REAL_EVENT``,
``SAMPLE_EVENT``) and on their twins (ids from ``FIRST_SIM_ID``, simulated by ``sim_vs_real``),
and the gaps real - simulated. The stage analysis itself is
:mod:`trkx.tracks.evaluate.stage_losses`.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from trkx.data.detector import PIXEL_VOLUMES
from trkx.realism.distributions import EventView
from trkx.stage_names import LEARNED_STAGES
from trkx.tracks.evaluate.metrics import overall_summary
from trkx.tracks.evaluate.projection import PIXEL_TRUTH, read_tables
from trkx.tracks.evaluate.stage_losses import pipeline_stages, stage_edges

REAL_EVENT = "real_pixel_truth/event000021001"
SAMPLE_EVENT = "sample_event/event000000001"
FIRST_SIM_ID = 900_000          # ids of the simulated twins (seeded by (seed, id))
STAGES = LEARNED_STAGES


def run_events(pipeline, events: list[tuple[dict[str, pd.DataFrame], int]],
               volumes: tuple[int, ...] | None) -> dict:
    """Cumulative signal-edge efficiency per stage and track efficiency of the models, pooled
    over ``events`` (``(tables, event_id)``; truth projected onto ``volumes`` when given)."""
    from trkx.tracks.evaluate.projection import projected_evaluation, projected_record

    graphs: dict[str, list] = {s: [] for s in STAGES}
    evaluations = []
    for tables, event_id in events:
        record, mask = projected_record(tables, pipeline.use_cells, pipeline.signal_pt_min,
                                        volumes, event_id)
        stage_graphs, labels, _ = pipeline.run(record, edge_labels=True)
        for stage in STAGES:
            graphs[stage].append(stage_graphs[stage])
        evaluations.append(projected_evaluation(record, mask, labels, event_id))
    stages = stage_edges(pipeline_stages(graphs, pipeline.builder))
    tracks = overall_summary(evaluations)
    return {"stage_efficiency": {s: stages[s]["efficiency"] for s in STAGES},
            "signal_edges": stages["embedding"]["n_signal_truth_edges"],
            "track_efficiency": tracks["efficiency"],
            "track_efficiency_err": tracks["efficiency_err"],
            "fake_rate": tracks["fake_rate"], "signal_particles": tracks["n_signal_particles"]}


def sample_twin_tables(tables: dict[str, pd.DataFrame], view: EventView
                       ) -> dict[str, pd.DataFrame]:
    """A simulated event cut down to the hits and particles of its subsampled view."""
    hit_ids = view.hits["hit_id"].to_numpy()
    keep = tables["hits"]["hit_id"].isin(hit_ids)
    return {"hits": tables["hits"][keep].reset_index(drop=True),
            "cells": tables["cells"][tables["cells"]["hit_id"].isin(hit_ids)],
            "particles": tables["particles"][tables["particles"]["particle_id"].isin(
                view.particles["particle_id"])].reset_index(drop=True),
            "truth": tables["truth"][tables["truth"]["hit_id"].isin(hit_ids)]}


def model_gaps(config: Path, checkpoints: Path, data: Path,
               events: list[dict[str, pd.DataFrame]], sample_twins: list[EventView]) -> dict:
    """Per-stage and track efficiencies of the models on the real events and their twins,
    and their absolute gaps."""
    from trkx.pipeline.inference import TrainedPipeline

    pipeline = TrainedPipeline.load(config, checkpoints)
    real = run_events(pipeline, [(read_tables(data / REAL_EVENT, PIXEL_TRUTH, cells=True),
                                  21001)], PIXEL_VOLUMES)
    twins = run_events(pipeline, [(t, FIRST_SIM_ID + i) for i, t in enumerate(events)],
                       PIXEL_VOLUMES)
    sample = run_events(pipeline, [(read_tables(data / SAMPLE_EVENT, "truth", cells=True), 1)],
                        None)
    sample_sim = run_events(pipeline, [(sample_twin_tables(t, view), FIRST_SIM_ID + i)
                                       for i, (t, view) in enumerate(zip(events, sample_twins))],
                            None)
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
