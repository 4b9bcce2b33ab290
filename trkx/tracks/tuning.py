"""Choosing the track builder's cut on validation events.

For scored validation records and candidate cuts ``c_1 < ... < c_m``, build the tracks at each
cut and evaluate them (double majority by default); the chosen cut is

    c* = argmax_c { efficiency(c) : fake_rate(c) <= fake_target }

(ties: the higher cut, fewer fakes); when no cut meets the fake-rate target, the cut of the
lowest fake rate. The GNN calls this at the end of training so its checkpoint carries the
builder's working point (trkx.working_point has the edge-level rule).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from trkx.tracks.building import TrackBuilder, tracks_frame
from trkx.tracks.event_truth import truth_from_record
from trkx.tracks.metrics import MetricCuts, evaluate_event, overall_summary

DEFAULT_CUTS: tuple[float, ...] = (0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)


@dataclass(frozen=True)
class TunedCut:
    """The chosen cut and the validation figures of every candidate."""

    cut: float
    efficiency: float
    fake_rate: float
    scan: tuple[tuple[float, float, float], ...]   # (cut, efficiency, fake rate)


def tune_cut(records: Sequence, builder: TrackBuilder | None = None,
             metric_cuts: MetricCuts | None = None, fake_target: float = 0.05,
             cuts: Sequence[float] = DEFAULT_CUTS) -> TunedCut:
    """The builder cut (``walk_cut`` or ``cc_cut``) of best efficiency at the fake target.

    ``records`` carry ``edge_index``, ``scores``, ``hit_id`` and truth; ``builder`` and
    ``metric_cuts`` default to ``TrackBuilder()`` and ``MetricCuts()``.
    """
    builder = builder if builder is not None else TrackBuilder()
    metric_cuts = metric_cuts if metric_cuts is not None else MetricCuts()
    if not records:
        raise ValueError("tuning the track builder needs at least one validation event")
    field = "walk_cut" if builder.method == "walkthrough" else "cc_cut"
    truths = [truth_from_record(r) for r in records]
    scan = []
    for cut in cuts:
        candidate = replace(builder, **{field: float(cut)})
        evaluations = [evaluate_event(truth, tracks_frame(r.hit_id, candidate.build(r),
                                                          int(getattr(r, "event_id", -1))),
                                      metric_cuts)
                       for r, truth in zip(records, truths)]
        summary = overall_summary(evaluations)
        scan.append((float(cut), float(summary["efficiency"]), float(summary["fake_rate"])))
    meeting = [s for s in scan if s[2] <= fake_target]
    if meeting:
        best = max(meeting, key=lambda s: (s[1], s[0]))
    else:
        best = min(scan, key=lambda s: (s[2], -s[1]))
    return TunedCut(best[0], best[1], best[2], tuple(scan))
