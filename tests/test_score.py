"""The TrackML score: hand-made cases with known answers, the real event, and properties."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trkx.data.io import load_event
from trkx.files.errors import TrackMLFormatError
from trkx.tracks.evaluate.score import match_tracks, score_event


def make_truth(particle_of_hit: list[int], weights: list[float] | None = None) -> pd.DataFrame:
    n = len(particle_of_hit)
    return pd.DataFrame({
        "hit_id": np.arange(1, n + 1),
        "particle_id": particle_of_hit,
        "weight": np.full(n, 1.0 / n) if weights is None else weights,
    })


def submit(truth: pd.DataFrame, track_of_hit: list[int]) -> pd.DataFrame:
    return pd.DataFrame({"hit_id": truth["hit_id"], "track_id": track_of_hit})


def oracle_score(truth: pd.DataFrame, submission: pd.DataFrame) -> float:
    """A deliberately plain transcription of the rules, one track at a time (test oracle)."""
    track_of = dict(zip(submission["hit_id"], submission["track_id"]))
    particle_of = dict(zip(truth["hit_id"], truth["particle_id"]))
    weight_of = dict(zip(truth["hit_id"], truth["weight"]))
    next_track = max(track_of.values(), default=-1) + 1
    tracks: dict[int, list[int]] = {}
    for hit in truth["hit_id"]:
        if hit not in track_of:
            track_of[hit], next_track = next_track, next_track + 1
        tracks.setdefault(track_of[hit], []).append(hit)
    particle_size: dict[int, int] = {}
    for particle in truth["particle_id"]:
        particle_size[particle] = particle_size.get(particle, 0) + 1
    credited = 0.0
    for hits in tracks.values():
        counts: dict[int, int] = {}
        for hit in hits:
            counts[particle_of[hit]] = counts.get(particle_of[hit], 0) + 1
        best = max(counts.values())
        major = min(p for p, c in counts.items() if c == best)
        if 2 * best > len(hits) and 2 * best > particle_size[major]:
            credited += sum(weight_of[h] for h in hits if particle_of[h] == major)
    return credited / sum(weight_of.values())


def test_perfect_submission_scores_one() -> None:
    truth = make_truth([1, 1, 1, 2, 2, 2, 2, 0], [0.1, 0.1, 0.1, 0.2, 0.2, 0.2, 0.1, 0.0])
    assert score_event(truth, submit(truth, [7, 7, 7, 9, 9, 9, 9, 3])) == pytest.approx(1.0)


def test_all_singletons_score_zero_for_tracks_longer_than_two() -> None:
    truth = make_truth([1, 1, 1, 2, 2, 2, 2])
    assert score_event(truth, submit(truth, list(range(7)))) == 0.0
    # A 1-hit particle in its own singleton is credited: 1 > 1/2 and 1 > 1/2.
    truth = make_truth([1, 2, 2, 2], [0.4, 0.2, 0.2, 0.2])
    assert score_event(truth, submit(truth, [0, 1, 2, 3])) == pytest.approx(0.4)


def test_track_split_in_halves_gets_no_credit() -> None:
    truth = make_truth([1, 1, 1, 1, 2, 2, 2], [0.1, 0.2, 0.1, 0.2, 0.1, 0.2, 0.1])
    # particle 1 split 2 + 2: each half holds exactly 50% of the particle: no credit.
    assert score_event(truth, submit(truth, [0, 0, 1, 1, 2, 2, 2])) == pytest.approx(0.4)
    # split 3 + 1: the 3-hit half is credited with its own hits' weight.
    assert score_event(truth, submit(truth, [0, 0, 0, 1, 2, 2, 2])) == pytest.approx(0.8)


def test_noise_only_tracks_score_nothing() -> None:
    truth = make_truth([0, 0, 0, 1, 1, 1], [0.0, 0.0, 0.0, 0.3, 0.3, 0.4])
    assert score_event(truth, submit(truth, [5, 5, 5, 6, 6, 6])) == pytest.approx(1.0)
    assert score_event(truth, submit(truth, [5, 5, 5, 5, 6, 6])) == pytest.approx(0.7)


def test_exactly_half_is_not_a_majority() -> None:
    truth = make_truth([1, 1, 2, 2, 2, 2], [0.25, 0.25, 0.125, 0.125, 0.125, 0.125])
    # track {1,1,2,2}: particle 1 holds exactly 50% of the track -> no credit (strict >).
    assert score_event(truth, submit(truth, [0, 0, 0, 0, 1, 1])) == 0.0
    # tie in the track goes to the smaller particle id, like the challenge's code
    match = match_tracks(truth, submit(truth, [0, 0, 0, 0, 1, 1]))
    assert match.major_particle_id[0] == 1


def test_hits_missing_from_the_submission_are_singletons() -> None:
    truth = make_truth([1, 1, 1, 2])
    partial = pd.DataFrame({"hit_id": [1, 2, 3], "track_id": [0, 0, 0]})
    assert score_event(truth, partial) == pytest.approx(1.0)  # hit 4 alone = particle 2


def test_bad_submissions_are_rejected() -> None:
    truth = make_truth([1, 1])
    with pytest.raises(TrackMLFormatError, match="hit_id 1 assigned twice"):
        score_event(truth, pd.DataFrame({"hit_id": [1, 1], "track_id": [0, 1]}))
    with pytest.raises(TrackMLFormatError, match=r"hit_id 99 .* is not a hit of the event"):
        score_event(truth, pd.DataFrame({"hit_id": [1, 99], "track_id": [0, 1]}))
    with pytest.raises(TrackMLFormatError, match="missing column 'track_id'"):
        score_event(truth, pd.DataFrame({"hit_id": [1, 2]}))


def test_real_event_perfect_and_degraded(sample_prefix: Path) -> None:
    (truth,) = load_event(sample_prefix, ["truth"])
    perfect = submit(truth, truth["particle_id"].tolist())
    weight_sum = float(truth["weight"].to_numpy(np.float64).sum())
    assert score_event(truth, perfect) == pytest.approx(1.0, abs=1e-12)
    assert score_event(truth, perfect, normalize=False) == pytest.approx(weight_sum, rel=1e-12)
    rng = np.random.default_rng(1)
    tracks = truth["particle_id"].to_numpy().copy()
    moved = rng.random(len(tracks)) < 0.1
    tracks[moved] = rng.integers(0, 10**6, moved.sum())
    degraded = submit(truth, tracks.tolist())
    assert score_event(truth, degraded) == pytest.approx(oracle_score(truth, degraded),
                                                         abs=1e-9)
    assert 0.7 < score_event(truth, degraded) < 0.95


@st.composite
def events_and_submissions(draw):
    n = draw(st.integers(1, 40))
    particles = draw(st.lists(st.integers(0, 6), min_size=n, max_size=n))
    weights = draw(st.lists(st.floats(0.0, 1.0), min_size=n, max_size=n))
    weights = [0.0 if p == 0 else w for p, w in zip(particles, weights)]
    if sum(weights) == 0:
        weights = [1.0 if p else 0.0 for p in particles]
    tracks = draw(st.lists(st.integers(0, 8), min_size=n, max_size=n))
    return make_truth(particles, weights), tracks


@settings(max_examples=200, deadline=None)
@given(events_and_submissions())
def test_score_matches_the_oracle_and_lies_in_unit_interval(case) -> None:
    truth, tracks = case
    if truth["weight"].sum() == 0:
        return
    submission = submit(truth, tracks)
    score = score_event(truth, submission)
    assert 0.0 <= score <= 1.0 + 1e-12
    assert score == pytest.approx(oracle_score(truth, submission), abs=1e-9)


@settings(max_examples=200, deadline=None)
@given(events_and_submissions())
def test_score_is_one_only_for_a_perfect_submission_without_noise(case) -> None:
    truth, tracks = case
    truth = truth[truth["particle_id"] != 0].reset_index(drop=True)
    if len(truth) == 0:
        return
    truth["weight"] = 1.0 + np.arange(len(truth)) % 3  # every hit weighs something
    tracks = tracks[: len(truth)]
    submission = submit(truth, tracks)
    # perfect: tracks partition hits exactly as particles do
    pairs = set(zip(truth["particle_id"], tracks))
    perfect = (len(pairs) == truth["particle_id"].nunique() == len(set(tracks)))
    score = score_event(truth, submission)
    assert (score == pytest.approx(1.0, abs=1e-12)) == perfect
