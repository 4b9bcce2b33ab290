"""Tracking efficiency, fake rate, duplicate rate and the TrackML score of events.

With the matching of :mod:`trkx.tracks.evaluate.matching` and the cuts of :class:`MetricCuts`:

- signal particles: ``pT >= pt_min``, ``|eta| <= max_eta`` (when set), ``>= min_hits`` hits,
  hits on ``>= min_layers`` distinct detector layers (3 by default: a particle whose hits lie
  on fewer layers has no curvature to measure; 0 drops the condition);
- candidate tracks: tracks with ``>= min_track_hits`` hits (only these are matched);
- efficiency = signal particles matched by >= 1 candidate track / signal particles;
- fake rate = candidate tracks matching no particle / candidate tracks;
- duplicate rate = matched candidate tracks beyond the first of their particle / matched ones.

Every fake (unmatched candidate track) is of one kind (:data:`FAKE_KINDS`), from its majority
particle ``p`` (``n_tp`` of the track's ``n_t`` hits):

- ``piece_signal`` / ``piece_other``: ``n_tp / n_t > 1/2`` (one particle's hits, but too few of
  them to match: the particle was split, or the rest of it was never built), ``p`` a signal
  particle or not (below the signal pT, too few hits, or outside ``max_eta``);
- ``mixed``: ``n_tp / n_t <= 1/2`` (a junction of particles, or noise hits taken in);
- ``noise``: ``p`` is the noise "particle" 0.

``fake_rate_<kind>`` = fakes of that kind / candidate tracks, so the four add up to the fake
rate; the pieces of particles outside the signal are what a builder's length or quality cut
cannot tell from real tracks (docs/levers.md). ``fake_rate_signal_majority`` counts as the
published pipelines do (HEPTv2's evaluation, trkx.tracks.evaluate.anchors): unmatched candidates
whose
majority particle is a signal particle / candidates whose majority particle is a signal
particle (tracks of noise or of particles outside the signal are left out of both).

Every efficiency is also split by the particle's origin, its production radius
``r_v = sqrt(vx^2 + vy^2)``: **prompt** particles have ``r_v <= PROMPT_RADIUS`` (1 mm: the
beam spot and the decays of short-lived hadrons), **secondaries** the rest (K0s, Lambda and
other decays in flight, photon conversions, hadronic interactions in the material). Sources
without production vertices (records written before the field) give no split.

The efficiency is also given by the particle's vertex ``|z|`` along the beam (bins
:data:`VERTEX_Z_BINS`, mm: ``efficiency_vz_<bin>``, and per origin
``efficiency_<origin>_vz_<bin>``), where the truth has production vertices, and for the short
particles: the prompt signal particles from vertices within ``NEAR_VERTEX_Z`` (100 mm) by their
hit count, 3, 4 and 5 or more (``efficiency_prompt_near_hits_<n>``), and of those the ones
whose hits lie on at most ``FEW_LAYERS`` (2) distinct layers (``..._few_layers``, where the
layers are known): a particle that ends in the material after two layers, one of them crossed
where two modules overlap, leaves 3 hits and no curvature to measure (HEPTv2's signal needs 3
pixel layers, trkx.tracks.evaluate.anchors).

Each rate ``p = k / n`` comes with its binomial standard error ``sqrt(p (1 - p) / n)``. The
TrackML score (:func:`trkx.tracks.evaluate.score.score_event`) uses every submitted track. Overall
figures pool the particles and tracks of all events; the overall TrackML score is the mean of
the per-event scores, as in the challenge. Everything is vectorised over hits, tracks and
particles (no Python loop per track).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from trkx.data.truth import PROMPT_RADIUS, SignalCuts
from trkx.tracks.evaluate.event_truth import EventTruth
from trkx.tracks.evaluate.matching import MATCHINGS, duplicate_flags, track_is_matched
from trkx.tracks.evaluate.score import match_tracks

FAKE_KINDS: tuple[str, ...] = ("piece_signal", "piece_other", "mixed", "noise")
#: Bins of the particle's vertex |z| [mm]: (name, low, high).
VERTEX_Z_BINS: tuple[tuple[str, float, float], ...] = (
    ("0_50", 0.0, 50.0), ("50_100", 50.0, 100.0), ("100_150", 100.0, 150.0),
    ("150_up", 150.0, math.inf))
#: The vertex |z| [mm] within which the short particles' figures are taken.
NEAR_VERTEX_Z = 100.0
#: Hit counts of the short particles' figures: (name, low, high) with low <= hits < high.
SHORT_HITS: tuple[tuple[str, int, float], ...] = (("3", 3, 4), ("4", 4, 5), ("5up", 5, math.inf))
#: The short particles' figures also count those with hits on at most this many layers.
FEW_LAYERS = 2


@dataclass(frozen=True)
class MetricCuts:
    """Signal-particle cuts, the candidate-track length and the matching definition."""

    pt_min: float = SignalCuts.pt_min        # GeV; the signal definition of trkx.data.truth
    max_eta: float | None = SignalCuts.max_eta
    min_hits: int = SignalCuts.min_hits
    min_track_hits: int = 3
    matching: str = "double_majority"
    #: distinct detector layers a signal particle's hits need: 3, a curvature to measure (the
    #: published definitions count >= 3 pixel layers); 0 counts every particle of >= min_hits
    min_layers: int = 3

    def __post_init__(self) -> None:
        if self.matching not in MATCHINGS:
            raise ValueError(f"matching {self.matching!r} is not one of {', '.join(MATCHINGS)}")
        if self.min_layers < 0:
            raise ValueError(f"min_layers must be >= 0, got {self.min_layers}")

    def signal(self, pt: np.ndarray, eta: np.ndarray, nhits: np.ndarray,
               n_layers: np.ndarray | None = None) -> np.ndarray:
        mask = (pt >= self.pt_min) & (nhits >= self.min_hits)
        if self.max_eta is not None:
            mask &= np.abs(eta) <= self.max_eta
        if self.min_layers:
            if n_layers is None:
                raise ValueError("min_layers needs the hits' detector layers")
            mask &= n_layers >= self.min_layers
        return mask


@dataclass(frozen=True, eq=False)
class EventEvaluation:
    """Per-particle and per-candidate-track tables of one event, and its TrackML score."""

    event_id: int
    particles: pd.DataFrame   # particle_id, pt, eta, nhits, n_layers, production_radius,
                              # vertex_z, signal, n_matched_tracks
    tracks: pd.DataFrame      # track_id, n_hits, eta, particle_id, n_shared, matched, duplicate,
                              # fake_kind ("" when matched; FAKE_KINDS), major_signal
    trackml_score: float
    n_hits: int


def binomial(k: int, n: int) -> tuple[float, float]:
    """Rate ``k / n`` and its binomial standard error (NaN, NaN when ``n = 0``)."""
    if n == 0:
        return math.nan, math.nan
    p = k / n
    return p, math.sqrt(p * (1.0 - p) / n)


def evaluate_event(truth: EventTruth, submission: pd.DataFrame,
                   cuts: MetricCuts = MetricCuts()) -> EventEvaluation:
    """Match the submission (``hit_id, track_id``) of one event and tabulate the results."""
    match = match_tracks(truth.frame(), submission)
    credited = float(match.major_weight[match.good].sum())
    total = float(truth.weight.sum())
    score = credited / total if total > 0 else 0.0

    # Geometric eta per track: mean asinh(z / r) of its hits (tracks in match.track_id order;
    # match_tracks gives unassigned hits fresh ids above the submitted ones, so rebuild them).
    hit_track = _track_of_hits(truth.hit_id, submission, len(match.track_id), match.track_id)
    eta_sum = np.bincount(hit_track, weights=truth.hit_eta, minlength=len(match.track_id))
    track_eta = eta_sum / np.maximum(match.n_hits, 1)

    candidate = match.n_hits >= cuts.min_track_hits
    matched = track_is_matched(match, cuts.matching) & candidate
    duplicate = duplicate_flags(match.major_particle_id, match.major_n_hits, matched)
    pids, rows, n_layers = truth.particles
    signal = cuts.signal(truth.pt[rows], truth.eta[rows], truth.nhits[rows], n_layers)
    kind = fake_kinds(match.major_particle_id, match.major_n_hits, match.n_hits, matched,
                      pids[signal])
    tracks = pd.DataFrame({
        "track_id": match.track_id[candidate],
        "n_hits": match.n_hits[candidate],
        "eta": track_eta[candidate],
        "particle_id": np.where(matched, match.major_particle_id, 0)[candidate],
        "n_shared": match.major_n_hits[candidate],
        "matched": matched[candidate],
        "duplicate": duplicate[candidate],
        "fake_kind": kind[candidate],
        "major_signal": np.isin(match.major_particle_id, pids[signal])[candidate],
    })

    matched_pids, counts = np.unique(match.major_particle_id[matched], return_counts=True)
    n_matched = np.zeros(len(pids), dtype=np.int64)
    n_matched[np.searchsorted(pids, matched_pids)] = counts
    particles = pd.DataFrame({
        "particle_id": pids,
        "pt": truth.pt[rows],
        "eta": truth.eta[rows],
        "nhits": truth.nhits[rows],
        "n_layers": n_layers,
        "production_radius": truth.production_radius[rows],
        "vertex_z": truth.vertex_z[rows],
        "signal": signal,
        "n_matched_tracks": n_matched,
    })
    return EventEvaluation(truth.event_id, particles, tracks, score, len(truth))


def fake_kinds(major_particle_id: np.ndarray, major_n_hits: np.ndarray, n_hits: np.ndarray,
               matched: np.ndarray, signal_ids: np.ndarray) -> np.ndarray:
    """Per track, its kind of fake (:data:`FAKE_KINDS`, the module docstring), ``""`` where
    ``matched``; ``signal_ids`` are the event's signal particle ids."""
    pure = 2 * major_n_hits > n_hits
    piece_of_signal = np.isin(major_particle_id, signal_ids)
    kind = np.select([matched, major_particle_id == 0, ~pure, piece_of_signal],
                     ["", "noise", "mixed", "piece_signal"], "piece_other")
    return kind.astype(object)


def _track_of_hits(hit_id: np.ndarray, submission: pd.DataFrame, n_tracks: int,
                   track_ids: np.ndarray) -> np.ndarray:
    """Index into ``track_ids`` (sorted) of every hit, replaying match_tracks' assignment."""
    sub_hits = submission["hit_id"].to_numpy(np.int64)
    sub_tracks = submission["track_id"].to_numpy(np.int64)
    order = np.argsort(sub_hits, kind="stable")
    sub_hits, sub_tracks = sub_hits[order], sub_tracks[order]
    pos = np.clip(np.searchsorted(sub_hits, hit_id), 0, max(len(sub_hits) - 1, 0))
    assigned = (sub_hits[pos] == hit_id) if len(sub_hits) else np.zeros(len(hit_id), bool)
    track = np.where(assigned, sub_tracks[pos] if len(sub_hits) else 0, 0)
    next_id = (sub_tracks.max() + 1) if len(sub_tracks) else 0
    track[~assigned] = next_id + np.arange(int((~assigned).sum()))
    index = np.searchsorted(track_ids, track)
    if n_tracks and not np.array_equal(track_ids[np.clip(index, 0, n_tracks - 1)], track):
        raise AssertionError("track ids of hits disagree with the matching")  # internal bug
    return index


def summarize(particles: pd.DataFrame, tracks: pd.DataFrame,
              trackml_scores: list[float]) -> dict[str, float | int]:
    """The headline figures (with binomial errors) of pooled particle and track tables."""
    signal = particles["signal"].to_numpy(bool)
    found = particles["n_matched_tracks"].to_numpy() > 0
    n_signal, n_found = int(signal.sum()), int((signal & found).sum())
    n_tracks = len(tracks)
    n_matched = int(tracks["matched"].sum())
    n_fake = n_tracks - n_matched
    n_duplicate = int(tracks["duplicate"].sum())
    efficiency, efficiency_err = binomial(n_found, n_signal)
    fake_rate, fake_rate_err = binomial(n_fake, n_tracks)
    duplicate_rate, duplicate_rate_err = binomial(n_duplicate, n_matched)
    major_signal = (tracks["major_signal"].to_numpy(bool) if "major_signal" in tracks
                    else np.zeros(n_tracks, bool))
    fake_signal_majority, fake_signal_majority_err = binomial(
        int((major_signal & ~tracks["matched"].to_numpy(bool)).sum()), int(major_signal.sum()))
    scores = np.asarray(trackml_scores, dtype=np.float64)
    return {
        "efficiency": efficiency, "efficiency_err": efficiency_err,
        **origin_figures(particles),
        "fake_rate": fake_rate, "fake_rate_err": fake_rate_err,
        **{f"fake_rate_{kind}": (int((tracks["fake_kind"] == kind).sum()) / n_tracks
                                 if n_tracks and "fake_kind" in tracks else math.nan)
           for kind in FAKE_KINDS},
        "fake_rate_signal_majority": fake_signal_majority,
        "fake_rate_signal_majority_err": fake_signal_majority_err,
        **vertex_z_figures(particles),
        **short_particle_figures(particles),
        "duplicate_rate": duplicate_rate, "duplicate_rate_err": duplicate_rate_err,
        "trackml_score": float(scores.mean()) if len(scores) else math.nan,
        "trackml_score_err": (float(scores.std(ddof=1) / math.sqrt(len(scores)))
                              if len(scores) > 1 else math.nan),
        "n_signal_particles": n_signal, "n_matched_signal_particles": n_found,
        "n_particles": len(particles),
        "n_tracks": n_tracks, "n_matched_tracks": n_matched, "n_fake_tracks": n_fake,
        "n_duplicate_tracks": n_duplicate,
        "mean_track_hits": float(tracks["n_hits"].mean()) if n_tracks else math.nan,
    }


def origin_figures(particles: pd.DataFrame) -> dict[str, float | int]:
    """Efficiency of the prompt and the secondary signal particles (module docstring), with
    errors and counts; empty when the table has no finite production radius."""
    if "production_radius" not in particles:
        return {}
    radius = particles["production_radius"].to_numpy(np.float64)
    signal = particles["signal"].to_numpy(bool) & np.isfinite(radius)
    if not signal.any():
        return {}
    found = particles["n_matched_tracks"].to_numpy() > 0
    out: dict[str, float | int] = {}
    for name, population in (("prompt", radius <= PROMPT_RADIUS),
                             ("secondary", radius > PROMPT_RADIUS)):
        chosen = signal & population
        rate, err = binomial(int((chosen & found).sum()), int(chosen.sum()))
        out.update({f"efficiency_{name}": rate, f"efficiency_{name}_err": err,
                    f"n_signal_{name}": int(chosen.sum())})
    return out


def _populations(particles: pd.DataFrame) -> dict[str, np.ndarray]:
    """The signal particles of a table (where their production radius is known), all and by
    origin."""
    radius = particles["production_radius"].to_numpy(np.float64)
    signal = particles["signal"].to_numpy(bool) & np.isfinite(radius)
    return {"": signal, "prompt_": signal & (radius <= PROMPT_RADIUS),
            "secondary_": signal & (radius > PROMPT_RADIUS)}


def vertex_z_figures(particles: pd.DataFrame) -> dict[str, float | int]:
    """Efficiency by the vertex |z| of the signal particles (:data:`VERTEX_Z_BINS`), all and
    by origin, with errors and counts; empty when the table has no vertex z."""
    if "vertex_z" not in particles or "production_radius" not in particles:
        return {}
    abs_z = np.abs(particles["vertex_z"].to_numpy(np.float64))
    known = np.isfinite(abs_z)
    if not (particles["signal"].to_numpy(bool) & known).any():
        return {}
    found = particles["n_matched_tracks"].to_numpy() > 0
    out: dict[str, float | int] = {}
    for prefix, population in _populations(particles).items():
        for name, low, high in VERTEX_Z_BINS:
            chosen = population & known & (abs_z >= low) & (abs_z < high)
            rate, err = binomial(int((chosen & found).sum()), int(chosen.sum()))
            out.update({f"efficiency_{prefix}vz_{name}": rate,
                        f"efficiency_{prefix}vz_{name}_err": err,
                        f"n_signal_{prefix}vz_{name}": int(chosen.sum())})
    return out


def short_particle_figures(particles: pd.DataFrame) -> dict[str, float | int]:
    """Efficiency of the prompt signal particles from vertices within :data:`NEAR_VERTEX_Z`
    by their hit count (:data:`SHORT_HITS`), and of those on at most :data:`FEW_LAYERS`
    distinct layers where the table knows the layers (``n_layers`` > 0); empty when the table
    has no vertex z."""
    if "vertex_z" not in particles or "production_radius" not in particles:
        return {}
    near = np.abs(particles["vertex_z"].to_numpy(np.float64)) < NEAR_VERTEX_Z
    prompt = _populations(particles)["prompt_"] & near
    if not prompt.any():
        return {}
    found = particles["n_matched_tracks"].to_numpy() > 0
    hits = particles["nhits"].to_numpy()
    layers = (particles["n_layers"].to_numpy() if "n_layers" in particles
              else np.zeros(len(particles), dtype=np.int64))
    layered = bool((layers[prompt] > 0).any())
    out: dict[str, float | int] = {}
    for name, low, high in SHORT_HITS:
        chosen = prompt & (hits >= low) & (hits < high)
        groups = [("", chosen)]
        if layered:
            groups.append(("_few_layers", chosen & (layers > 0) & (layers <= FEW_LAYERS)))
        for suffix, group in groups:
            rate, err = binomial(int((group & found).sum()), int(group.sum()))
            out.update({f"efficiency_prompt_near_hits_{name}{suffix}": rate,
                        f"efficiency_prompt_near_hits_{name}{suffix}_err": err,
                        f"n_signal_prompt_near_hits_{name}{suffix}": int(group.sum())})
    return out


def event_summary(evaluation: EventEvaluation) -> dict[str, float | int]:
    """:func:`summarize` of one event, with its event id and hit count."""
    figures = summarize(evaluation.particles, evaluation.tracks, [evaluation.trackml_score])
    return {"event_id": evaluation.event_id, "n_hits": evaluation.n_hits, **figures}


def overall_summary(evaluations: list[EventEvaluation]) -> dict[str, float | int]:
    """:func:`summarize` of all events pooled."""
    particles = pd.concat([e.particles for e in evaluations], ignore_index=True)
    tracks = pd.concat([e.tracks for e in evaluations], ignore_index=True)
    figures = summarize(particles, tracks, [e.trackml_score for e in evaluations])
    return {"n_events": len(evaluations),
            "n_hits": int(sum(e.n_hits for e in evaluations)), **figures}


def cuts_dict(cuts: MetricCuts) -> dict:
    return asdict(cuts)
