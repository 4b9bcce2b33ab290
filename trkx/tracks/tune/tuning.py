"""Choosing the track builder's cut and minimum lengths on validation events.

For scored validation records, candidate cuts ``c_1 < ... < c_m`` and candidate minimum track
lengths ``l_1 < ... < l_k``, one length for the central and one for the forward region
(TrackBuilder.min_length, min_length_forward: tracks with ``|eta_t| >= forward_eta``), build
the tracks at each cut once, evaluate them once (double majority by default), and score every
pair of lengths from that one evaluation; the chosen point is

    (c*, l_c*, l_f*) = argmax_(c, l_c, l_f) { efficiency : fake_rate <= fake_target }

(ties: the higher cut, then the shorter central, then the shorter forward length); when no
point meets the fake-rate target, the point of the lowest fake rate (ties: best efficiency).

Dissolving a track touches no other track's match, so the figures at lengths ``L`` follow from
the unshortened evaluation: with ``keep_t = (n_t >= L(region_t))`` over the candidate tracks,

    efficiency(L) = #{signal p : some matched t of p has keep_t} / #signal,
    fake_rate(L)  = #{t : keep_t, t unmatched} / #{t : keep_t}

(exactly what building at ``L`` and evaluating gives). The same holds for the short tracks the
GNN is sure of (TrackBuilder.short_score ``sigma``): ``keep_t = (n_t >= L(region_t)) or
(s_t >= sigma)``, with ``s_t`` the mean score of the track's edges, so the candidates
``sigma`` in ``short_scores`` (None: off) are scored from the same evaluation.

The same holds for the track quality cut (TrackBuilder.quality_cut ``kappa``): at each cut
``c`` the quality model (trkx.tracks.fit.quality) is fitted to the candidate tracks of the
validation events built at ``c`` (label: matched), and ``keep_t`` above also needs
``q_t >= kappa`` for the candidates ``kappa`` in ``quality_cuts`` (None: no quality cut).
Records without hit positions or layers, or events without a fake (or a matched) track, leave
the quality out.

The short tracks may answer to a model of their own instead of ``s_t`` (TrackBuilder.
short_quality_cut ``lambda``): at each cut the short-track model (trkx.tracks.fit.quality,
SHORT_FEATURES) is fitted to the candidates of 3 hits up to the longest candidate length that
find a signal particle (label 1) or are fakes (label 0; the matched tracks of other particles,
which move neither figure, are left out), and
for the candidates ``lambda`` in ``short_quality_cuts`` (None: not used; such points have no
``sigma``) ``keep_t = (n_t >= L(region_t) and q_t >= kappa) or (3 <= n_t < L(region_t) and
q'_t >= lambda)``: a short track the model keeps is not judged by ``kappa``.

With the extension (TrackBuilder.extend_window_xy set on ``builder``) a track takes the lone
hits on its helix after the lengths and the quality cut, so the dissolved hits of one track can
join another and the formulas above no longer give the final figures. The tuner then builds the
points of a shortlist exactly (each from the same candidates: TrackBuilder.finish) and chooses
among them by the same rule (trkx.tracks.tune.shortlist: which points, and why).

``trkx tune-tracks`` (trkx.tracks.tune.tune_tracks) calls this on the GNN's scores of the
validation events and writes the chosen point into the tuned tracks config
(:meth:`TunedCut.apply`; trkx.tracks.stage_config).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from trkx.arrays import as_numpy
from trkx.tracks.builder.building import TrackBuilder
from trkx.tracks.builder.graph import ScoredGraph, graph_from_record
from trkx.tracks.builder.track_labels import track_mean_score, tracks_frame
from trkx.tracks.evaluate.anchors import anchor_evaluation
from trkx.tracks.evaluate.event_truth import truth_from_record
from trkx.tracks.evaluate.metrics import EventEvaluation, MetricCuts, evaluate_event
from trkx.tracks.fit.quality import SHORT_FEATURES, QualityModel, fit_quality
from trkx.tracks.fit.track_table import track_table
from trkx.tracks.tune.length_figures import LengthTable, length_figures
from trkx.tracks.tune.shortlist import TrackPoint, choose, exact_shortlist

DEFAULT_CUTS: tuple[float, ...] = (0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
DEFAULT_LENGTHS: tuple[int, ...] = (3, 4, 5, 6, 7, 8)
DEFAULT_SHORT_SCORES: tuple[float | None, ...] = (None, 0.9, 0.95, 0.97, 0.98, 0.99)
DEFAULT_QUALITY_CUTS: tuple[float | None, ...] = (None, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6,
                                                  0.7, 0.8)
DEFAULT_SHORT_QUALITY_CUTS: tuple[float | None, ...] = (None, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8)
#: How the tuner counts the efficiency it maximises: trkx's own signal, or the anchors'.
EFFICIENCY_COUNTS: tuple[str, ...] = ("trkx", "anchors")


@dataclass(frozen=True)
class TunedCut:
    """The chosen cut and lengths, and the validation figures of every candidate."""

    cut: float
    min_length: int
    efficiency: float
    fake_rate: float
    # (cut, central length, efficiency, fake rate) at equal lengths in both regions
    scan: tuple[tuple[float, int, float, float], ...]
    min_length_forward: int | None = None
    short_score: float | None = None
    quality_cut: float | None = None
    quality: QualityModel | None = None
    short_quality_cut: float | None = None
    short_quality: QualityModel | None = None

    def apply(self, builder: TrackBuilder) -> TrackBuilder:
        """``builder`` with the chosen cut (``walk_cut``, or ``cc_cut`` for connected
        components), lengths, short-track gate and quality cuts with their models."""
        cut = {"walk_cut": self.cut} if builder.method == "walkthrough" else {"cc_cut": self.cut}
        return replace(builder, **cut, min_length=self.min_length,
                       min_length_forward=self.min_length_forward, short_score=self.short_score,
                       quality_cut=self.quality_cut if self.quality is not None else None,
                       quality=self.quality if self.quality_cut is not None else None,
                       short_quality_cut=(self.short_quality_cut
                                          if self.short_quality is not None else None),
                       short_quality=(self.short_quality
                                      if self.short_quality_cut is not None else None))

    def figures(self) -> dict[str, float]:
        """The chosen point's validation figures."""
        return {"val_track_efficiency": float(self.efficiency),
                "val_fake_rate": float(self.fake_rate)}


def _found_signal(evaluation) -> pd.Series:
    """Per track id of ``evaluation``'s candidates, the signal particle it matches (0: none)."""
    particles = evaluation.particles
    signal_ids = particles["particle_id"].to_numpy()[particles["signal"].to_numpy(bool)]
    tracks = evaluation.tracks
    pid = tracks["particle_id"].to_numpy()
    found = tracks["matched"].to_numpy(bool) & np.isin(pid, signal_ids)
    return pd.Series(np.where(found, pid, 0), index=tracks["track_id"].to_numpy(np.int64))


def _evaluated(truth, frame: pd.DataFrame, metric_cuts: MetricCuts,
               count: str) -> tuple[EventEvaluation, pd.Series, int]:
    """The evaluation of ``frame``, each track's found signal particle and the number of
    signal particles, counted as ``count`` says (:func:`tune_cut`)."""
    evaluation = evaluate_event(truth, frame, metric_cuts)
    counted = evaluation if count == "trkx" else anchor_evaluation(truth, frame)
    return (evaluation, _found_signal(counted),
            int(counted.particles["signal"].sum()))


def _track_table(evaluation, mean_score: np.ndarray | None = None,
                 found: pd.Series | None = None) -> pd.DataFrame:
    """Candidate tracks of one evaluation: length, |eta|, matched, the signal particle found
    (``found``: per track id, 0 or absent: none; None: the evaluation's own), the mean score
    of their edges (``mean_score``: per track id; absent: 0) and their quality (1 until a
    quality model scores them)."""
    found = _found_signal(evaluation) if found is None else found
    tracks = evaluation.tracks
    track_id = tracks["track_id"].to_numpy(np.int64)
    return pd.DataFrame({"track_id": track_id,
                         "n_hits": tracks["n_hits"].to_numpy(),
                         "abs_eta": np.abs(tracks["eta"].to_numpy()),
                         "matched": tracks["matched"].to_numpy(bool),
                         "signal_pid": found.reindex(track_id, fill_value=0).to_numpy(),
                         "mean_score": (np.zeros(len(tracks)) if mean_score is None else
                                        mean_score[track_id]),
                         "quality": 1.0,
                         "event": evaluation.event_id})


def tune_cut(records: Sequence, builder: TrackBuilder | None = None,
             metric_cuts: MetricCuts | None = None, fake_target: float = 0.05,
             cuts: Sequence[float] = DEFAULT_CUTS,
             lengths: Sequence[int] = DEFAULT_LENGTHS,
             forward_lengths: Sequence[int] | None = None,
             short_scores: Sequence[float | None] = DEFAULT_SHORT_SCORES,
             quality_cuts: Sequence[float | None] = DEFAULT_QUALITY_CUTS,
             quality_budget: float | None = None,
             extension_points: int = 8,
             short_quality_cuts: Sequence[float | None] = DEFAULT_SHORT_QUALITY_CUTS,
             efficiency_count: str = "trkx") -> TunedCut:
    """The builder cut (``walk_cut`` or ``cc_cut``), lengths, ``short_score`` and
    ``quality_cut`` (with its model), or ``short_quality_cut`` in place of ``short_score``
    (with the short-track model), of best efficiency at the fake target.

    ``records`` carry ``edge_index``, ``scores``, ``hit_id`` and truth; ``builder`` and
    ``metric_cuts`` default to ``TrackBuilder()`` and ``MetricCuts()``. ``forward_lengths``
    (default: ``lengths``; ``()``: one length everywhere) are the forward region's candidates
    (tracks with ``|eta_t| >= builder.forward_eta``). With ``quality_budget`` the points
    without a quality cut are chosen among first; then, among all points whose efficiency is
    at least that point's less ``quality_budget``, the one of lowest fake rate (ties: best
    efficiency) is taken. ``efficiency_count`` ``"anchors"`` counts the efficiency on the
    published pipelines' definitions (trkx.tracks.evaluate.anchors: each track's pixel
    projection, signal pT > 0.9 GeV on >= 3 pixel layers) in place of ``metric_cuts``; the
    fake rate stays trkx's own (every candidate of the whole track counted).

    Per cut: the candidates built and evaluated once (:func:`_candidates_at_cut`), the quality
    models fitted to them (:func:`_fit_models`), every point scored by the formulas
    (:func:`_formula_points`); then, with the extension, a shortlist built exactly
    (trkx.tracks.tune.shortlist.exact_shortlist, :func:`_extended_points`), and the rule
    (trkx.tracks.tune.shortlist.choose) takes the point.
    """
    if efficiency_count not in EFFICIENCY_COUNTS:
        raise ValueError(f"efficiency_count {efficiency_count!r}: expected one of "
                         f"{', '.join(EFFICIENCY_COUNTS)}")
    builder = builder if builder is not None else TrackBuilder()
    metric_cuts = metric_cuts if metric_cuts is not None else MetricCuts()
    if not records:
        raise ValueError("tuning the track builder needs at least one validation event")
    forward_lengths = tuple(lengths) if forward_lengths is None else tuple(forward_lengths)
    truths = [truth_from_record(r) for r in records]
    extending = builder.extend_window_xy is not None
    longest = max((*lengths, *forward_lengths))
    scan, points, models, candidates = [], [], {}, {}   # candidates[cut, i]: (labels, graph, table)
    for cut in map(float, cuts):
        table, features, n_signal, built = _candidates_at_cut(
            records, truths, builder, cut, metric_cuts, efficiency_count)
        if extending:
            candidates.update({(cut, i): one for i, one in enumerate(built)})
        models[cut] = _fit_models(table, features, longest)
        gates = [(sure, None) for sure in short_scores]
        if models[cut][1] is not None:
            gates += [(None, lam) for lam in short_quality_cuts if lam is not None]
        kappas = quality_cuts if models[cut][0] is not None else (None,)
        arrays = LengthTable.of(table)
        for central in lengths:
            plain = length_figures(arrays, n_signal, central, central, 0.0)
            scan.append((cut, int(central), *plain))
            points += _formula_points(arrays, n_signal, cut, int(central), plain,
                                      forward_lengths, gates, kappas, builder.forward_eta)
    if extending:
        points = exact_shortlist(points, extension_points, fake_target, quality_budget,
                                 lambda chosen: _extended_points(records, truths, builder,
                                                                 metric_cuts, efficiency_count,
                                                                 models, candidates, chosen))
    best = choose(points, fake_target, quality_budget)
    model, short_model = models[best.cut]
    return TunedCut(best.cut, best.central, best.efficiency, best.fake_rate, tuple(scan),
                    best.forward, best.short_score, best.quality_cut,
                    model if best.quality_cut is not None else None, best.short_quality_cut,
                    short_model if best.short_quality_cut is not None else None)


def _candidates_at_cut(records: Sequence, truths: list, builder: TrackBuilder, cut: float,
                       metric_cuts: MetricCuts, count: str,
                       ) -> tuple[pd.DataFrame, list, int, list[tuple]]:
    """Step 1 at one cut: every event's candidates built once, unshortened (lengths 1, no
    gate, no quality cut, no extension), and evaluated once. Returns their table
    (:func:`_track_table`, all events), the quality models' inputs per event (None where a
    record has no positions or layers), the signal particles counted as ``count`` says, and
    per event ``(labels, graph, track table)`` for building points exactly from them."""
    field = "walk_cut" if builder.method == "walkthrough" else "cc_cut"
    unshortened = replace(builder, **{field: cut}, min_length=1, min_length_forward=None,
                          short_score=None, quality_cut=None, extend_window_xy=None)
    tables, features, built, n_signal = [], [], [], 0
    for i, (record, truth) in enumerate(zip(records, truths)):
        graph = graph_from_record(record, min_score=cut)
        labels = unshortened.build_graph(graph, getattr(record, "pos", None))
        fitted = _candidates_table(record, labels, graph)
        built.append((labels, graph, fitted))
        evaluation, found, signal = _evaluated(
            truth, tracks_frame(record.hit_id, labels, int(getattr(record, "event_id", -1))),
            metric_cuts, count)
        tables.append(_track_table(evaluation, _mean_scores(record, labels, cut), found)
                      .assign(event=i))
        features.append(None if fitted is None else fitted.set_index("track_id").loc[
            tables[-1]["track_id"].to_numpy()].reset_index())
        n_signal += signal
    return pd.concat(tables, ignore_index=True), features, n_signal, built


def _fit_models(table: pd.DataFrame, features: list, longest: int,
                ) -> tuple[QualityModel | None, QualityModel | None]:
    """Step 2 at one cut: the track quality model and the short-track model fitted to its
    candidates (None where a record has no features, or the candidates are all matched or
    all fakes); their scores are written into ``table`` (``quality``, ``short_quality``)."""
    if not all(f is not None for f in features) or not 0 < table["matched"].mean() < 1:
        return None, None
    pooled = pd.concat(features, ignore_index=True)
    model = fit_quality(pooled, table["matched"].to_numpy(bool))
    table["quality"] = model.score(pooled)
    short_model = _short_model(pooled, table, longest)
    if short_model is not None:
        table["short_quality"] = short_model.score(pooled)
    return model, short_model


def _formula_points(table: LengthTable, n_signal: int, cut: float, central: int,
                    plain: tuple[float, float], forward_lengths: Sequence[int],
                    gates: list[tuple], kappas: Sequence[float | None],
                    forward_eta: float) -> list[TrackPoint]:
    """Step 3 at one cut and central length: every combination of a forward length, a gate
    of the short tracks (``(short_score, None)`` or ``(None, short_quality_cut)``) and a
    quality cut, scored by the formulas (:func:`length_figures`; ``plain`` the figures
    without any of them)."""
    points = []
    for forward in forward_lengths or (None,):
        for sure, lam in gates:
            for kappa in kappas:
                figures = plain if (forward, sure, kappa, lam) == (None, None, None, None) \
                    else length_figures(table, n_signal, central,
                                        central if forward is None else forward, forward_eta,
                                        sure, kappa, lam)
                points.append(TrackPoint(cut, central, forward, *figures, sure, kappa, lam))
    return points


def _short_model(pooled: pd.DataFrame, table: pd.DataFrame, longest: int) -> QualityModel | None:
    """The short-track model fitted to the candidates of 3 to ``longest - 1`` hits: those that
    find a signal particle against the fakes (None when either is missing). A matched
    candidate of a particle outside the signal neither finds nor fakes, so it is left out: as a
    positive it taught the model that short pieces of low-pT particles are wanted (at the
    same fakes, 372 -> 408 of 440 signal short tracks kept, two-fold by event)."""
    n_hits = pooled["n_hits"].to_numpy()
    matched = table["matched"].to_numpy(bool)
    finds = table["signal_pid"].to_numpy() != 0
    used = (n_hits >= 3) & (n_hits < longest) & (finds | ~matched)
    if finds[used].all() or not finds[used].any():
        return None
    return fit_quality(pooled[used], finds[used], features=SHORT_FEATURES)


def _extended_points(records: Sequence, truths: list, builder: TrackBuilder,
                     metric_cuts: MetricCuts, efficiency_count: str, models: dict,
                     candidates: dict, points: list[TrackPoint]) -> list[TrackPoint]:
    """``points`` with the efficiency and fake rate of their tracks built exactly, extension
    included, from the candidates (and graph) of their cut."""
    field = "walk_cut" if builder.method == "walkthrough" else "cc_cut"
    out = []
    for p in points:
        model, short_model = models[p.cut]
        point = replace(builder, **{field: p.cut}, min_length=p.central,
                        min_length_forward=p.forward, short_score=p.short_score,
                        quality_cut=p.quality_cut,
                        quality=model if p.quality_cut is not None else None,
                        short_quality_cut=p.short_quality_cut,
                        short_quality=short_model if p.short_quality_cut is not None else None)
        tables, n_signal = [], 0
        for i, (record, truth) in enumerate(zip(records, truths)):
            labels, graph, fitted = candidates[p.cut, i]
            labels, _ = point.finish(labels, graph, getattr(record, "pos", None), fitted)
            evaluation, found, signal = _evaluated(truth, tracks_frame(record.hit_id, labels, i),
                                                   metric_cuts, efficiency_count)
            tables.append(_track_table(evaluation, found=found).assign(event=i))
            n_signal += signal
        efficiency, fake = length_figures(pd.concat(tables, ignore_index=True), n_signal,
                                          0, 0, 0.0)
        out.append(p._replace(efficiency=efficiency, fake_rate=fake))
    return out


def _candidates_table(record, labels: np.ndarray, graph: ScoredGraph) -> pd.DataFrame | None:
    """The track table (trkx.tracks.fit.track_table) of the candidates ``labels`` on ``graph``
    (the record's edges at or above the cut): the quality models' inputs, and what
    TrackBuilder.finish reads at every working point of the cut; None when the record has no
    hit positions or layers."""
    if getattr(record, "pos", None) is None or getattr(record, "volume_id", None) is None or \
            getattr(record, "layer_id", None) is None:
        return None
    return track_table(labels, as_numpy(record.pos), graph.layer // 1000, graph.layer % 1000,
                       graph.src, graph.dst, graph.score)


def _mean_scores(record, labels: np.ndarray, cut: float) -> np.ndarray:
    """Per track id of ``labels`` (compact), the mean score of its edges with score >= cut."""
    src, dst = (np.asarray(a, dtype=np.int64) for a in as_numpy(record.edge_index))
    score = as_numpy(record.scores).astype(np.float64)
    above = score >= cut
    per_hit = track_mean_score(labels, src[above], dst[above], score[above])
    out = np.zeros(int(labels.max()) + 1 if len(labels) else 0)
    out[labels] = per_hit
    return out
