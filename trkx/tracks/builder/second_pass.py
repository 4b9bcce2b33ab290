"""The second pass: tracks from the hits the first pass left alone, over edges it did not follow.

The first pass (trkx.tracks.builder.building.TrackBuilder: the walkthrough over edges of score
``>= c``, the lengths, the quality cuts, the extension) keeps the tracks it is sure of. A
particle whose edges the GNN scores below ``c`` (one that ends in the material after 3-4
layers, a secondary) leaves its hits alone: tracks of one hit each. As iterative tracking in
the experiments' reconstruction does, the second pass walks again, on those hits only:

    A   = { i : hit i is alone after the first pass },
    G_2 = { (i, j) in G : i, j in A, s_ij >= c_2 },      c_2 < c,

the walkthrough over ``G_2`` (the first pass's ``max_layer_hits`` and ``sibling_ratio``),
stitched as the first pass stitches, gives the candidates; a candidate ``t`` of >= 3 hits
becomes a track when its second-pass model keeps it,

    q2_t = sigmoid(b + w . (f_t - m) / s) >= kappa_2,

``f_t`` the short-track inputs (trkx.tracks.fit.quality.SHORT_FEATURES: length, edge scores,
junctions, the helix fit, |d0|, the beam-line pT, whether its helix goes on into other hits)
of its track-table row on ``G_2``. No first-pass track changes, so the pass only adds tracks.

The model is fitted on validation events to the second-pass candidates that find a signal
particle (label 1) against the fakes (label 0; the matched candidates of other particles left
out, as for the short-track model), and ``(c_2, kappa_2)`` is the point of best efficiency
whose added fakes stay within ``budget`` times the first pass's tracks of >= 3 hits
(:func:`tune_second_pass`): the fakes the pass may spend, counted against what the first pass
built, so that the real low-pT tracks it also adds cannot buy fakes by swelling the
denominator of the fake rate.

Measured (docs/levers.md): on the shipped cells set's 10 realistic test
events the hits left alone hold 140 of the 5,423 prompt and 297 of the 382 secondary signal
particles of 5 events lost by the first pass; walked again at ``c_2 = 0.5`` with a model fitted
on 8 other events, ``kappa_2 = 0.5`` finds 69 more signal particles for 42 more fakes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from trkx.tracks.builder.graph import ScoredGraph
from trkx.tracks.builder.stitching import stitch_pieces
from trkx.tracks.builder.walkthrough import walkthrough_tracks
from trkx.tracks.fit.quality import SHORT_FEATURES, QualityModel, fit_quality
from trkx.tracks.fit.track_table import track_table

DEFAULT_SECOND_CUTS: tuple[float, ...] = (0.3, 0.5, 0.7)
DEFAULT_SECOND_QUALITY_CUTS: tuple[float, ...] = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8)
DEFAULT_SECOND_MIN_HITS: tuple[int, ...] = (3, 5, 7)


@dataclass(frozen=True)
class WalkOptions:
    """How the second pass walks and stitches: the first pass's own settings."""

    max_layer_hits: int = 3
    sibling_ratio: float = 0.7
    stitch: bool = True
    stitch_window: float = 0.3
    stitch_gap: float = 350.0
    stitch_curvature: float = 3e-4
    stitch_angle: float = 0.05


def second_candidates(labels: np.ndarray, graph: ScoredGraph, pos: np.ndarray, cut: float,
                      walk: WalkOptions = WalkOptions()) -> np.ndarray:
    """Per hit, its second-pass candidate (0..K-1) or -1: the walkthrough over the edges of
    ``graph`` with score ``>= cut`` between hits alone in ``labels`` (tracks of one hit),
    stitched; candidates of >= 3 hits only (module docstring)."""
    labels = np.asarray(labels, dtype=np.int64)
    alone = np.bincount(labels)[labels] == 1 if len(labels) else np.zeros(0, bool)
    keep = (graph.score >= cut) & alone[graph.src] & alone[graph.dst]
    sub = ScoredGraph(graph.num_nodes, graph.src[keep], graph.dst[keep], graph.score[keep],
                      graph.rank, graph.layer)
    walked = walkthrough_tracks(sub, cut, walk.max_layer_hits, walk.sibling_ratio)
    if walk.stitch:
        walked = stitch_pieces(walked, pos, sub.rank, walk.stitch_window, walk.stitch_gap,
                               walk.stitch_curvature, walk.stitch_angle, sub.layer)
    walked = np.where(alone, walked, -1)
    inside = walked >= 0
    ids, inverse, counts = np.unique(walked[inside], return_inverse=True, return_counts=True)
    out = np.full(len(labels), -1, dtype=np.int64)
    big = counts >= 3
    renumber = np.full(len(ids), -1, dtype=np.int64)
    renumber[big] = np.arange(int(big.sum()))
    out[inside] = renumber[inverse.reshape(-1)]
    return out


def candidate_table(candidates: np.ndarray, graph: ScoredGraph, pos: np.ndarray,
                    cut: float) -> pd.DataFrame:
    """The track-table rows (trkx.tracks.fit.track_table) of the candidates, ``track_id`` their
    candidate number, on the edges of ``graph`` with score ``>= cut``."""
    above = graph.score >= cut
    return track_table(candidates, pos, graph.layer // 1000, graph.layer % 1000,
                       graph.src[above], graph.dst[above], graph.score[above])


def add_tracks(labels: np.ndarray, candidates: np.ndarray, kept: np.ndarray) -> np.ndarray:
    """``labels`` with the candidates ``kept`` (their numbers) as new tracks, ids after
    ``labels.max()``."""
    labels = np.asarray(labels, dtype=np.int64).copy()
    chosen = np.isin(candidates, kept) & (candidates >= 0)
    labels[chosen] = labels.max() + 1 + candidates[chosen]
    return labels


def second_pass(labels: np.ndarray, graph: ScoredGraph, pos: np.ndarray, cut: float,
                model: QualityModel, quality_cut: float, min_hits: int = 3,
                walk: WalkOptions = WalkOptions()) -> tuple[np.ndarray, pd.DataFrame]:
    """``labels`` with the second pass's tracks added (module docstring), and those tracks'
    track-table rows (ids in the returned labels, their ``q2_t`` as ``quality``)."""
    candidates = second_candidates(labels, graph, pos, cut, walk)
    table = candidate_table(candidates, graph, pos, cut)
    if len(table) == 0:
        return np.asarray(labels, dtype=np.int64), table.assign(quality=np.zeros(0))
    table["quality"] = model.score(table)
    table = table[(table["quality"].to_numpy() >= quality_cut)
                  & (table["n_hits"].to_numpy() >= min_hits)].reset_index(drop=True)
    kept = table["track_id"].to_numpy()
    out = add_tracks(labels, candidates, kept)
    table["track_id"] = int(np.max(labels)) + 1 + kept
    return out, table


@dataclass(frozen=True)
class TunedSecondPass:
    """The chosen point: walk cut ``cut`` over the lone hits, model cut ``quality_cut``,
    candidates of ``min_hits`` or more."""

    cut: float
    quality_cut: float
    min_hits: int
    model: QualityModel
    added_signal: int         # validation: signal particles the pass adds
    added_fakes: int          # validation: fakes it adds
    first_tracks: int         # validation: the first pass's tracks of >= 3 hits

    def figures(self) -> dict[str, float]:
        """What it adds on the validation events: signal particles and fakes."""
        return {"val_second_signal": float(self.added_signal),
                "val_second_fakes": float(self.added_fakes)}


@dataclass(frozen=True)
class LabelledCandidates:
    """One event's second-pass candidates at one cut, labelled against the truth: their
    track-table rows (``track_id`` the candidate number) with ``finds`` (the signal particle
    it finds that the first pass did not, 0: none) and ``fake``."""

    table: pd.DataFrame
    finds: np.ndarray
    fake: np.ndarray


def choose_second(labelled: dict[float, list[LabelledCandidates]], first_tracks: int,
                  budget: float, quality_cuts: Sequence[float] = DEFAULT_SECOND_QUALITY_CUTS,
                  min_hits: Sequence[int] = DEFAULT_SECOND_MIN_HITS) -> TunedSecondPass | None:
    """Fit a model per cut and fewest hits (to the candidates of that length or more: those
    that find a signal particle against the fakes) and take the point of most signal particles
    added whose added fakes stay ``<= budget * first_tracks`` (ties: fewer fakes, then the
    higher cuts and lengths); None when no model has both labels or no point adds one."""
    best = None
    points = [(cut, length) for cut in sorted(labelled, reverse=True)
              for length in sorted(min_hits, reverse=True)]
    for cut, length in points:
        events = labelled[cut]
        if not events:
            continue
        table = pd.concat([e.table.assign(event=i) for i, e in enumerate(events)],
                          ignore_index=True)
        finds = np.concatenate([e.finds for e in events])
        fake = np.concatenate([e.fake for e in events])
        long = table["n_hits"].to_numpy() >= length
        used = long & ((finds != 0) | fake)
        if not (finds[used] != 0).any() or not fake[used].any():
            continue
        model = fit_quality(table[used], finds[used] != 0, features=SHORT_FEATURES)
        quality = model.score(table)
        for kappa in sorted(quality_cuts, reverse=True):
            kept = long & (quality >= kappa)
            found = {(int(e), int(p)) for e, p in zip(table["event"].to_numpy()[kept],
                                                       finds[kept]) if p != 0}
            fakes = int(fake[kept].sum())
            if fakes > budget * first_tracks or not found:
                continue
            key = (len(found), -fakes)
            if best is None or key > best[0]:
                best = (key, TunedSecondPass(float(cut), float(kappa), int(length), model,
                                             len(found), fakes, int(first_tracks)))
    return None if best is None else best[1]


def with_second_pass(builder, tuned: TunedSecondPass | None):
    """``builder`` (a TrackBuilder) with the tuned second pass (unchanged when None)."""
    if tuned is None:
        return builder
    return replace(builder, second_cut=tuned.cut, second_quality_cut=tuned.quality_cut,
                   second_min_hits=tuned.min_hits, second_quality=tuned.model)
