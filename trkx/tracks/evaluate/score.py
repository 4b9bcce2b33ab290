"""The TrackML challenge score, vectorised.

For a submission that assigns every hit a ``track_id``, each track ``t`` with ``n_t`` hits gets
its majority particle ``p(t)``: the particle owning most of its hits (ties go to the smaller
``particle_id``, noise 0 included, as in the challenge's code). With ``n_{t,p}`` the hits of
``t`` from ``p``, ``n_p`` the hits of ``p`` in the event and ``w_i`` the truth weights,

    score = sum_{t : n_{t,p(t)} > n_t / 2  and  n_{t,p(t)} > n_{p(t)} / 2}
                sum_{i in t, particle(i) = p(t)} w_i   /   sum_i w_i .

The normalisation by the event's total weight is the challenge's (``score_event``): a perfect
submission scores 1 whatever the weights sum to. ``normalize=False`` returns the credited weight
itself, which for a perfect submission equals the sum of the event's truth weights. Hits absent
from the submission count as single-hit tracks, as in the challenge's code.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from trkx.files.errors import TrackMLFormatError


@dataclass(frozen=True, eq=False)
class TrackMatch:
    """Per-track majority matching (arrays over tracks)."""

    track_id: np.ndarray              # [T] submission track ids (int64)
    n_hits: np.ndarray                # [T] hits in the track
    major_particle_id: np.ndarray     # [T] majority particle
    major_n_hits: np.ndarray          # [T] hits of the track from the majority particle
    major_particle_n_hits: np.ndarray  # [T] hits of the majority particle in the event
    major_weight: np.ndarray          # [T] summed truth weight of those hits (float64)

    @property
    def good(self) -> np.ndarray:
        """The double-majority condition of the score (both fractions strictly above 1/2)."""
        return ((2 * self.major_n_hits > self.n_hits)
                & (2 * self.major_n_hits > self.major_particle_n_hits))


def check_submission(submission: pd.DataFrame, truth_hit_ids: np.ndarray,
                     label: str = "submission") -> pd.DataFrame:
    """Validate a ``hit_id, track_id`` table against the event's hit ids; return it typed."""
    for column in ("hit_id", "track_id"):
        if column not in submission.columns:
            raise TrackMLFormatError(
                f"{label}: missing column {column!r}; columns present: "
                f"{', '.join(map(str, submission.columns))}")
        values = pd.to_numeric(submission[column], errors="coerce")
        if values.isna().any():
            row = int(np.flatnonzero(values.isna().to_numpy())[0])
            raise TrackMLFormatError(
                f"{label}: bad value {submission[column].iloc[row]!r} in column {column!r} "
                f"at line {row + 2}")
    hit_ids = submission["hit_id"].to_numpy(np.int64)
    duplicated = pd.Series(hit_ids).duplicated().to_numpy()
    if duplicated.any():
        row = int(np.flatnonzero(duplicated)[0])
        raise TrackMLFormatError(f"{label}: hit_id {hit_ids[row]} assigned twice "
                                 f"(line {row + 2})")
    unknown = ~np.isin(hit_ids, truth_hit_ids)
    if unknown.any():
        row = int(np.flatnonzero(unknown)[0])
        raise TrackMLFormatError(f"{label}: hit_id {hit_ids[row]} at line {row + 2} is not a "
                                 "hit of the event")
    return pd.DataFrame({"hit_id": hit_ids,
                         "track_id": submission["track_id"].to_numpy(np.int64)})


def match_tracks(truth: pd.DataFrame, submission: pd.DataFrame) -> TrackMatch:
    """Majority particle, hit counts and weight of every submitted track.

    ``truth`` needs ``hit_id``, ``particle_id``, ``weight``; ``submission`` needs ``hit_id``,
    ``track_id``. Hits missing from the submission become single-hit tracks.
    """
    truth_hits = truth["hit_id"].to_numpy(np.int64)
    submission = check_submission(submission, truth_hits)
    order = np.argsort(submission["hit_id"].to_numpy(), kind="stable")
    sub_hits = submission["hit_id"].to_numpy()[order]
    sub_tracks = submission["track_id"].to_numpy()[order]
    pos = np.clip(np.searchsorted(sub_hits, truth_hits), 0, max(len(sub_hits) - 1, 0))
    assigned = (sub_hits[pos] == truth_hits) if len(sub_hits) else np.zeros(len(truth_hits),
                                                                            bool)
    track_of_hit = np.where(assigned, sub_tracks[pos] if len(sub_hits) else 0, 0)
    # Unassigned hits: fresh ids after the largest submitted one, one per hit.
    next_id = (sub_tracks.max() + 1) if len(sub_tracks) else 0
    track_of_hit[~assigned] = next_id + np.arange(int((~assigned).sum()))

    particle = truth["particle_id"].to_numpy(np.int64)
    weight = truth["weight"].to_numpy(np.float64)
    particle_values, particle_code = np.unique(particle, return_inverse=True)
    particle_n_hits = np.bincount(particle_code)
    track_values, track_code = np.unique(track_of_hit, return_inverse=True)
    track_n_hits = np.bincount(track_code)

    # (track, particle) pairs: counts and weights, ordered by track then particle.
    pair_key = track_code.astype(np.int64) * len(particle_values) + particle_code
    pair_values, pair_code = np.unique(pair_key, return_inverse=True)
    pair_count = np.bincount(pair_code)
    pair_weight = np.bincount(pair_code, weights=weight)
    pair_track = pair_values // len(particle_values)
    pair_particle = pair_values % len(particle_values)
    # Majority per track: most hits, ties to the smallest particle id (lexsort: last key first).
    best = np.lexsort((pair_particle, -pair_count, pair_track))
    first = np.ones(len(best), dtype=bool)
    first[1:] = pair_track[best][1:] != pair_track[best][:-1]
    chosen = best[first]
    return TrackMatch(
        track_id=track_values,
        n_hits=track_n_hits,
        major_particle_id=particle_values[pair_particle[chosen]],
        major_n_hits=pair_count[chosen],
        major_particle_n_hits=particle_n_hits[pair_particle[chosen]],
        major_weight=pair_weight[chosen],
    )


def score_event(truth: pd.DataFrame, submission: pd.DataFrame, normalize: bool = True,
                ) -> float:
    """The TrackML score of one event (see the module docstring for the definition)."""
    match = match_tracks(truth, submission)
    credited = float(match.major_weight[match.good].sum())
    if not normalize:
        return credited
    total = float(truth["weight"].to_numpy(np.float64).sum())
    return credited / total if total > 0 else 0.0
