"""The evaluation of a folder of tracks against truth, as one function: what ``trkx evaluate``
prints and writes, and what ``trkx infer`` and ``trkx run`` run in process on their tracks.

For every ``eventNNNNNNNNN-tracks.csv`` of the tracks folder the truth is read once from the
events folder (an event record ``eventNNNNNNNNN*.pt`` with per-hit truth, else the TrackML
files), and the event is counted three ways:

- trkx's own figures (:func:`trkx.tracks.evaluate.metrics.evaluate_event` with the ``cuts`` given):
  efficiency overall, by origin and by vertex |z|, fake rate by kind, duplicates, score;
- the anchors' own count (:func:`trkx.tracks.evaluate.anchors.anchor_evaluation`, HEPTv2's
evaluation);
- with records that hold edges, the edge efficiency and purity at the builder's cut, and those
  of each earlier stage's records (``stages``).

Where the tracks folder holds ``eventNNNNNNNNN-parameters.csv`` (``trkx infer`` writes them),
the fitted parameters are matched to the signal particles (trkx.tracks.evaluate.resolution).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from tqdm import tqdm

from trkx.tracks.evaluate.anchors import ANCHOR_CUTS, anchor_evaluation
from trkx.tracks.evaluate.binned import BinnedRate, standard_rates
from trkx.tracks.evaluate.metrics import (
    MetricCuts,
    cuts_dict,
    evaluate_event,
    event_summary,
    overall_summary,
)


def evaluation_settings(config_path: str | None, overrides: list[str],
                        builder=None) -> tuple[object, float]:
    """``(MetricCuts, edge cut)`` of an evaluation: the config's ``metrics`` section, and the
    cut from which a record's edge counts as kept: that of ``builder`` (the track builder that
    made the tracks) when given, else of the config's builder (a tuned tracks config,
    trkx.tracks.stage_config)."""
    from trkx.config import naming_overrides
    from trkx.tracks.files import config_section
    from trkx.tracks.stage_config import track_builder

    label = config_path or "--set"
    with naming_overrides(overrides, label):   # a bad --set names it
        cuts = config_section(config_path, overrides, "metrics", MetricCuts, label)
        if builder is None:
            builder = track_builder(config_path, overrides)
    return cuts, builder.edge_cut


@dataclass(frozen=True, eq=False)
class TrackEvaluation:
    """The outcome of :func:`evaluate_tracks`: ``report`` is ``metrics.json`` (cuts, overall,
    events, anchors, binned, edges, resolution), with the tables and rates behind it."""

    cuts: MetricCuts
    report: dict
    particles: pd.DataFrame
    tracks: pd.DataFrame
    rates: dict[str, BinnedRate]
    fitted: pd.DataFrame | None


def load_truth(source: Path, event_id: int):
    """``(EventTruth, record or None, particles table or None)`` from a record file or a
    TrackML prefix."""
    from trkx.data.io import load_event
    from trkx.data.record import load_record
    from trkx.files.errors import TrackMLFormatError
    from trkx.tracks.evaluate.event_truth import truth_from_frames, truth_from_record

    if source.suffix == ".pt":
        record = load_record(source)
        try:
            truth = truth_from_record(record, str(source))
        except ValueError as exc:
            raise TrackMLFormatError(str(exc)) from exc
        return truth, record, None
    hits, particles, truth = load_event(source, ["hits", "particles", "truth"], detector=None)
    return truth_from_frames(event_id, hits, particles, truth), None, particles


def stage_edge_metrics(name: str, folder: Path, cut: float, cuts: MetricCuts) -> dict:
    """The pooled and per-event edge figures of the records in ``folder`` at ``cut``."""
    from trkx.data.listing import record_event_id, record_paths
    from trkx.data.record import load_record
    from trkx.tracks.evaluate.edge_metrics import edge_metrics, pool_edge_metrics

    per_event = []
    for path in record_paths(folder, allow_empty=True):
        metrics = edge_metrics(load_record(path), cut, cuts)
        if metrics is not None:
            per_event.append({"event_id": record_event_id(path), **metrics})
    return {"stage": name, "overall": pool_edge_metrics(per_event) if per_event else None,
            "events": per_event}


def evaluate_tracks(tracks_folder: Path, events_folder: Path, cuts: MetricCuts,
                    edge_cut: float | Mapping[int, float], stages: Sequence[tuple[str, Path]] = (),
                    progress: bool = True, sets: Mapping[int, str] | None = None
                    ) -> TrackEvaluation:
    """Evaluate every tracks file of ``tracks_folder`` (module docstring); ``edge_cut`` is the
    GNN score from which a record's edge counts as kept (one per event id where several model
    sets made the tracks: each builder's own); ``stages`` are ``(name, folder)`` of earlier
    stages' records, every edge of which counts. ``sets`` (event id -> model set) adds
    ``sets`` to the report: each set's overall figures over its own events."""
    from trkx.files.errors import TrackMLFormatError
    from trkx.tracks.builder.parameters import parameters_file_name
    from trkx.tracks.evaluate.edge_metrics import edge_metrics, pool_edge_metrics
    from trkx.tracks.evaluate.resolution import matched_parameters, resolution_summary
    from trkx.tracks.files import (
        find_event_source,
        read_parameters,
        read_tracks,
        track_files,
    )

    def cut_of(event_id: int) -> float:
        return float(edge_cut) if isinstance(edge_cut, (int, float)) else edge_cut[event_id]

    evaluations, anchors, record_edges, matched = [], [], [], []
    for event_id, path in tqdm(sorted(track_files(tracks_folder).items()), desc="evaluate",
                               unit="event", disable=not progress):
        truth, record, particle_table = load_truth(find_event_source(events_folder, event_id),
                                                   event_id)
        try:
            submission = read_tracks(path, event_id)
            evaluations.append(evaluate_event(truth, submission, cuts))
            anchors.append(anchor_evaluation(truth, submission))
        except TrackMLFormatError as exc:
            raise TrackMLFormatError(f"{path}: {exc}") from exc
        fitted = path.parent / parameters_file_name(event_id)
        if fitted.is_file():
            matched.append(matched_parameters(evaluations[-1], read_parameters(fitted),
                                              particle_table).assign(event_id=event_id))
        if record is not None:
            metrics = edge_metrics(record, cut_of(event_id), cuts)
            if metrics is not None:
                record_edges.append({"event_id": event_id, **metrics})

    edges = {}
    if record_edges:
        edges["events"] = {"overall": pool_edge_metrics(record_edges), "events": record_edges}
    for name, folder in stages:
        if name == "gnn" and not isinstance(edge_cut, (int, float)):
            raise ValueError("a folder of GNN records is evaluated at one edge cut")
        cut = float(edge_cut) if name == "gnn" else 0.0  # earlier stages: all edges kept
        edges[name] = stage_edge_metrics(name, folder, cut, cuts)
    evaluation = assemble_evaluation(evaluations, anchors, cuts, edges, sets)
    if matched:
        fitted_rows = pd.concat(matched, ignore_index=True)
        evaluation.report["resolution"] = resolution_summary(fitted_rows)
        evaluation = TrackEvaluation(cuts, evaluation.report, evaluation.particles,
                                     evaluation.tracks, evaluation.rates, fitted_rows)
    return evaluation


def assemble_evaluation(evaluations: Sequence, anchors: Sequence, cuts: MetricCuts,
                        edges: dict | None = None, sets: Mapping[int, str] | None = None,
                        ) -> TrackEvaluation:
    """The :class:`TrackEvaluation` of per-event evaluations (trkx.tracks.evaluate.metrics.
    EventEvaluation) counted with ``cuts`` and, ``anchors``, with the anchors' cuts: the
    report, the particle and track tables, the binned rates (no fitted parameters)."""
    particles = pd.concat([e.particles.assign(event_id=e.event_id) for e in evaluations],
                          ignore_index=True)
    tracks = pd.concat([e.tracks.assign(event_id=e.event_id) for e in evaluations],
                       ignore_index=True)
    rates = standard_rates(particles, tracks, cuts.pt_min, cuts.max_eta, cuts.min_hits)
    report = {"cuts": cuts_dict(cuts), "overall": overall_summary(evaluations),
              "events": [event_summary(e) for e in evaluations],
              "anchors": {"cuts": cuts_dict(ANCHOR_CUTS), "overall": overall_summary(anchors)},
              "binned": {name: rate.to_dict() for name, rate in rates.items()},
              "edges": edges or {}}
    if sets is not None and len(set(sets.values())) > 1:
        report["sets"] = {name: overall_summary([e for e in evaluations
                                                 if sets.get(e.event_id) == name])
                          for name in dict.fromkeys(sets.values())}
    return TrackEvaluation(cuts, report, particles, tracks, rates, None)
