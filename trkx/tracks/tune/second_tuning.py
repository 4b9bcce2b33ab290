"""Choosing the second pass's walk cut and model on validation events
(trkx.tracks.builder.second_pass).

For the first pass as tuned (a TrackBuilder with its working point), each validation event is
built once; at every candidate cut ``c_2`` the second pass's candidates are made from the hits
it left alone and evaluated once, all of them added to the first pass's tracks. A candidate is
labelled by what it adds: ``finds`` the signal particle it matches that no first-pass track
finds (counted as the tuner counts: trkx's signal, or the anchors', trkx.tracks.tune.tuning), and
``fake`` when it matches no particle (trkx's own count). Adding or leaving out one candidate
touches no other track's match (the hits are disjoint), so every model cut ``kappa_2`` is
scored from that one evaluation; trkx.tracks.builder.second_pass.choose_second fits the model and
takes the point.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from trkx.arrays import as_numpy
from trkx.tracks.builder.building import TrackBuilder
from trkx.tracks.builder.graph import graph_from_record
from trkx.tracks.builder.second_pass import (
    DEFAULT_SECOND_CUTS,
    DEFAULT_SECOND_QUALITY_CUTS,
    LabelledCandidates,
    TunedSecondPass,
    add_tracks,
    candidate_table,
    choose_second,
    second_candidates,
)
from trkx.tracks.builder.track_labels import tracks_frame
from trkx.tracks.evaluate.event_truth import truth_from_record
from trkx.tracks.evaluate.metrics import MetricCuts
from trkx.tracks.tune.tuning import EFFICIENCY_COUNTS, _evaluated


def tune_second_pass(records: Sequence, builder: TrackBuilder, budget: float,
                     metric_cuts: MetricCuts | None = None,
                     cuts: Sequence[float] = DEFAULT_SECOND_CUTS,
                     quality_cuts: Sequence[float] = DEFAULT_SECOND_QUALITY_CUTS,
                     efficiency_count: str = "trkx") -> TunedSecondPass | None:
    """The second pass of most signal particles added on ``records`` (scored validation
    events with truth, hit positions and layers) whose added fakes stay within ``budget``
    times the first pass's tracks (module docstring); None when none adds a particle.
    ``builder`` is the first pass as tuned (its own second pass is ignored)."""
    if efficiency_count not in EFFICIENCY_COUNTS:
        raise ValueError(f"efficiency_count {efficiency_count!r}: expected one of "
                         f"{', '.join(EFFICIENCY_COUNTS)}")
    if not 0.0 <= budget < 1.0:
        raise ValueError(f"the second pass's fake budget must lie in [0, 1), got {budget}")
    if not cuts or min(cuts) >= builder.edge_cut:
        raise ValueError(f"the second pass walks below the first pass's cut "
                         f"{builder.edge_cut}: got cuts {tuple(cuts)}")
    metric_cuts = metric_cuts if metric_cuts is not None else MetricCuts()
    first = replace(builder, second_cut=None, second_quality_cut=None, second_quality=None)
    walk = builder.walk_options()
    labelled: dict[float, list[LabelledCandidates]] = {float(c): [] for c in cuts}
    first_tracks = 0
    for i, record in enumerate(records):
        truth = truth_from_record(record)
        pos = np.asarray(as_numpy(record.pos), dtype=np.float64)
        graph = graph_from_record(record, min_score=float(min(cuts)))
        labels, _ = first.build_graph_with_table(graph, pos)
        evaluation, found, _ = _evaluated(truth, tracks_frame(record.hit_id, labels, i),
                                          metric_cuts, efficiency_count)
        first_tracks += int((evaluation.tracks["n_hits"].to_numpy()
                             >= metric_cuts.min_track_hits).sum())
        already = set(found[found != 0].tolist())
        for cut in labelled:
            candidates = second_candidates(labels, graph, pos, cut, walk)
            table = candidate_table(candidates, graph, pos, cut)
            ids = table["track_id"].to_numpy()
            grown = add_tracks(labels, candidates, ids)
            evaluation, found, _ = _evaluated(truth, tracks_frame(record.hit_id, grown, i),
                                              metric_cuts, efficiency_count)
            new_ids = int(labels.max()) + 1 + ids
            finds = found.reindex(new_ids, fill_value=0).to_numpy(np.int64).copy()
            finds[np.isin(finds, list(already))] = 0
            matched = evaluation.tracks.set_index("track_id")["matched"]
            fake = ~matched.reindex(new_ids, fill_value=True).to_numpy(bool)
            labelled[cut].append(LabelledCandidates(table, finds, fake))
    return choose_second(labelled, first_tracks, budget, quality_cuts)
