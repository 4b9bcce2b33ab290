"""Choosing the track builder's cut on validation events.

For scored validation records, candidate cuts ``c_1 < ... < c_m`` and candidate minimum track
lengths ``l_1 < ... < l_k`` (TrackBuilder.min_length), build the tracks at each pair and
evaluate them (double majority by default); the chosen pair is

    (c*, l*) = argmax_(c, l) { efficiency(c, l) : fake_rate(c, l) <= fake_target }

(ties: the higher cut, then the shorter length); when no pair meets the fake-rate target, the
pair of the lowest fake rate. The GNN calls this at the end of training so its checkpoint
carries the builder's working point (trkx.working_point has the edge-level rule).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

from trkx.tracks.building import TrackBuilder, dissolve_short, tracks_frame
from trkx.tracks.event_truth import truth_from_record
from trkx.tracks.metrics import MetricCuts, evaluate_event, overall_summary

DEFAULT_CUTS: tuple[float, ...] = (0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
DEFAULT_LENGTHS: tuple[int, ...] = (3, 4, 5, 6)


@dataclass(frozen=True)
class TunedCut:
    """The chosen cut and the validation figures of every candidate."""

    cut: float
    min_length: int
    efficiency: float
    fake_rate: float
    scan: tuple[tuple[float, int, float, float], ...]   # (cut, length, efficiency, fake rate)


def tune_cut(records: Sequence, builder: TrackBuilder | None = None,
             metric_cuts: MetricCuts | None = None, fake_target: float = 0.05,
             cuts: Sequence[float] = DEFAULT_CUTS,
             lengths: Sequence[int] = DEFAULT_LENGTHS) -> TunedCut:
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
        unshortened = [replace(builder, **{field: float(cut)}, min_length=1).build(r)
                       for r in records]
        for length in lengths:
            evaluations = [
                evaluate_event(truth, tracks_frame(r.hit_id, dissolve_short(labels, length),
                                                   int(getattr(r, "event_id", -1))),
                               metric_cuts)
                for r, truth, labels in zip(records, truths, unshortened)]
            summary = overall_summary(evaluations)
            scan.append((float(cut), int(length), float(summary["efficiency"]),
                         float(summary["fake_rate"])))
    meeting = [s for s in scan if s[3] <= fake_target]
    if meeting:
        best = max(meeting, key=lambda s: (s[2], s[0], -s[1]))
    else:
        best = min(scan, key=lambda s: (s[3], -s[2]))
    return TunedCut(best[0], best[1], best[2], best[3], tuple(scan))


def builder_options(options: Mapping[str, Any], working_point: Mapping[str, float] | None,
                    label: str = "builder") -> dict[str, Any]:
    """The builder section with its null keys taken from the GNN's working point.

    ``working_point`` is a GNN checkpoint's (``walk_cut``, ``min_length``, ...); a null key it
    does not hold is an error naming the key, as is a null key without a working point.
    """
    types = {f.name: f.type for f in fields(TrackBuilder)}
    out = dict(options)
    for key, value in options.items():
        if value is not None:
            continue
        if working_point is None or key not in working_point:
            where = ("the GNN checkpoint's working point has none" if working_point is not None
                     else "give the GNN checkpoint (--checkpoint), whose working point sets it")
            raise ValueError(f"{label}: {key} is null: {where}; or set a value")
        number = working_point[key]
        out[key] = round(number) if types.get(key) in (int, "int") else float(number)
    return out
