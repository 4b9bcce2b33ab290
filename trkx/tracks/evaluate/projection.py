"""Evaluation of events whose truth covers only part of their hits (the real event 21001: truth
for its pixel hits, ``eventNNNNNNNNN-truth-pixel.csv[.gz]``, columns ``hit_id,particle_id``).

The rule of the data's README: the pipeline runs on the whole event; its tracks are then
projected onto the hits that carry truth (a track's pixel part). A candidate is a projected
track of >= ``min_track_hits`` hits, a signal particle has pT >= the signal cut and >=
``min_hits`` truth hits, and matching is double majority on the projection
(trkx.tracks.evaluate.metrics).
Hits without a truth row count as noise in the record's edge labels; particle_id 0 is noise.
The measured hit position stands in for the true crossing (the truth table has none).

The same projection onto chosen detector volumes of a fully simulated event (``volumes``) gives
the simulated twin of such an event (``--checkpoints`` of benchmarks/sim_vs_real.py).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from trkx.data.record_type import Record

#: The partial truth part of an event: ``PREFIX-truth-pixel.csv[.gz]``.
PIXEL_TRUTH = "truth-pixel"


def pixel_truth_file(prefix: str | Path) -> Path | None:
    """The pixel-truth file of the event ``prefix``, or None."""
    for suffix in (".csv.gz", ".csv"):
        path = Path(f"{prefix}-{PIXEL_TRUTH}{suffix}")
        if path.is_file():
            return path
    return None


def projected_truth(hits: pd.DataFrame, truth: pd.DataFrame, particles: pd.DataFrame,
                    volumes: tuple[int, ...] | None) -> pd.DataFrame:
    """A truth table of the hits that carry truth (inside ``volumes`` when given), with the
    hit position as the true crossing and challenge weights over these hits."""
    from trkx.data.weights import hit_weights

    pos = hits.set_index("hit_id")[["x", "y", "z", "volume_id"]]
    table = truth[["hit_id", "particle_id"]].join(pos, on="hit_id", how="inner")
    if volumes is not None:
        table = table[table["volume_id"].isin(volumes)]
    table = table.rename(columns={"x": "tx", "y": "ty", "z": "tz"}).drop(columns="volume_id")
    for name in ("tpx", "tpy", "tpz"):
        table[name] = 0.0
    table = table.reset_index(drop=True)
    table["weight"] = hit_weights(table, particles)
    return table


def projected_record(tables: dict[str, pd.DataFrame], use_cells: bool, signal_pt_min: float,
                     volumes: tuple[int, ...] | None, event_id: int) -> tuple[Record, np.ndarray]:
    """The event record of ``tables`` (hits, particles, truth, optional cells) with projected
    truth, and the mask of the hits that carry truth."""
    from trkx.data.detector import load_detector
    from trkx.data.record import build_event_record
    from trkx.data.truth import SignalCuts

    truth = projected_truth(tables["hits"], tables["truth"], tables["particles"], volumes)
    record = build_event_record(tables["hits"], tables.get("cells"), tables["particles"], truth,
                                detector=load_detector(), use_cells=use_cells,
                                signal_cuts=SignalCuts(pt_min=signal_pt_min),
                                event_id=event_id)
    return record, tables["hits"]["hit_id"].isin(truth["hit_id"]).to_numpy()


def project(truth, mask: np.ndarray):
    """The per-hit truth (:class:`trkx.tracks.evaluate.event_truth.EventTruth`) of the hits ``mask``
    selects."""
    return truth.subset(mask)


def projected_evaluation(record: Record, mask: np.ndarray, labels: np.ndarray, event_id: int,
                         cuts=None):
    """Double-majority evaluation of the tracks ``labels`` (one per hit of ``record``)
    projected onto the hits ``mask`` selects (``cuts``: trkx.tracks.evaluate.metrics.MetricCuts)."""
    from trkx.tracks.builder.track_labels import tracks_frame
    from trkx.tracks.evaluate.event_truth import truth_from_record
    from trkx.tracks.evaluate.metrics import MetricCuts, evaluate_event

    truth = project(truth_from_record(record), mask)
    frame = tracks_frame(truth.hit_id, labels[mask], event_id)
    return evaluate_event(truth, frame, cuts or MetricCuts())


def read_tables(prefix: str | Path, truth_part: str, cells: bool = False,
                ) -> dict[str, pd.DataFrame]:
    """hits, particles, truth (the part ``truth_part``) and, with ``cells``, cells of an event."""
    parts = [("hits", "hits"), ("particles", "particles"), ("truth", truth_part)]
    if cells:
        parts.append(("cells", "cells"))
    tables = {}
    for name, part in parts:
        path = Path(f"{prefix}-{part}.csv.gz")
        tables[name] = pd.read_csv(path if path.is_file() else Path(f"{prefix}-{part}.csv"))
    return tables


def pixel_truth_labels(prefix: str | Path, tracks: pd.DataFrame, event_id: int,
                       signal_pt_min: float) -> tuple[Record, np.ndarray, np.ndarray]:
    """The projected record of the event ``prefix`` (which has a pixel-truth part), the mask
    of its hits with truth, and the track of every hit from ``tracks`` (``hit_id, track_id``;
    hits it lacks are singletons, never candidates): read once, evaluated with any cuts by
    :func:`projected_evaluation`."""
    record, mask = projected_record(read_tables(prefix, PIXEL_TRUTH), False, signal_pt_min,
                                    None, event_id)
    by_hit = tracks.set_index("hit_id")["track_id"]
    labels = by_hit.reindex(record.hit_id.numpy()).fillna(-1).to_numpy().astype(np.int64)
    unassigned = labels < 0
    labels[unassigned] = labels.max(initial=0) + 1 + np.arange(int(unassigned.sum()))
    return record, mask, labels


def evaluate_pixel_truth(prefix: str | Path, tracks: pd.DataFrame, event_id: int, cuts=None):
    """The projected evaluation of the tracks ``tracks`` (``hit_id, track_id``; hits it lacks
    are in no track) of the event ``prefix``, which has a pixel-truth part; ``cuts``
    (trkx.tracks.evaluate.metrics.MetricCuts, default its defaults) define signal and candidates."""
    from trkx.tracks.evaluate.metrics import MetricCuts

    cuts = cuts or MetricCuts()
    record, mask, labels = pixel_truth_labels(prefix, tracks, event_id, cuts.pt_min)
    return projected_evaluation(record, mask, labels, event_id, cuts)


def pixel_truth_evaluations(events: list[tuple[str, pd.DataFrame, int]], cuts=None,
                            ) -> tuple[list, list]:
    """The projected evaluations of tracks on events with a pixel-truth part: ``events`` are
    ``(prefix, tracks, event_id)``; each event is read once and counted with ``cuts``
    (trkx.tracks.evaluate.metrics.MetricCuts, default its defaults) and as the anchors count
    (trkx.tracks.evaluate.anchors): the two lists of per-event evaluations."""
    from trkx.tracks.evaluate.anchors import ANCHOR_CUTS
    from trkx.tracks.evaluate.metrics import MetricCuts

    cuts = cuts or MetricCuts()
    own, anchors = [], []
    for prefix, tracks, event_id in events:
        record, mask, labels = pixel_truth_labels(prefix, tracks, event_id, cuts.pt_min)
        own.append(projected_evaluation(record, mask, labels, event_id, cuts))
        anchors.append(projected_evaluation(record, mask, labels, event_id, ANCHOR_CUTS))
    return own, anchors


def pixel_truth_report(events: list[tuple[str, pd.DataFrame, int]], cuts=None) -> dict:
    """:func:`pixel_truth_evaluations` pooled: trkx's summary, the anchors' under
    ``anchors``."""
    from trkx.tracks.evaluate.metrics import overall_summary

    own, anchors = pixel_truth_evaluations(events, cuts)
    return {**overall_summary(own), "anchors": overall_summary(anchors)}
