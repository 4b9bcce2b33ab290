"""Which reconstructed track matches which particle.

From :func:`trkx.tracks.evaluate.score.match_tracks` every track ``t`` (``n_t`` hits) has a majority
particle ``p`` holding ``n_tp`` of its hits, and ``p`` has ``n_p`` hits in the event. A track
matches ``p`` (never the noise "particle" 0) under

- ``double_majority`` (default): ``n_tp / n_t > 1/2`` and ``n_tp / n_p > 1/2``;
- ``atlas`` (one-way): ``n_tp / n_t > 1/2``;
- ``perfect``: ``n_tp = n_t = n_p`` (exactly the particle's hits).

Under double majority at most one track can hold more than half of a particle's hits, so it
never produces duplicates; a particle split into pieces of at most half its hits each is lost
and its pieces count as fakes. Under ``atlas`` every piece purer than 1/2 matches, the extra
ones counting as duplicates.
"""

from __future__ import annotations

import numpy as np

from trkx.tracks.evaluate.score import TrackMatch

MATCHINGS = ("double_majority", "atlas", "perfect")


def track_is_matched(match: TrackMatch, definition: str = "double_majority") -> np.ndarray:
    """Per track: it matches its majority particle under ``definition`` (bool [T])."""
    if definition == "double_majority":
        ok = match.good
    elif definition == "atlas":
        ok = 2 * match.major_n_hits > match.n_hits
    elif definition == "perfect":
        ok = (match.major_n_hits == match.n_hits) & \
            (match.major_n_hits == match.major_particle_n_hits)
    else:
        raise ValueError(f"matching {definition!r} is not one of {', '.join(MATCHINGS)}")
    return ok & (match.major_particle_id != 0)


def duplicate_flags(particle_id: np.ndarray, n_shared: np.ndarray,
                    matched: np.ndarray) -> np.ndarray:
    """Per track: it matches a particle that another, larger matched track already matches.

    Among the matched tracks of one particle the one sharing most hits with it (then the first)
    is the original; the rest are duplicates.
    """
    duplicate = np.zeros(len(particle_id), dtype=bool)
    index = np.flatnonzero(matched)
    if len(index) == 0:
        return duplicate
    order = index[np.lexsort((index, -n_shared[index], particle_id[index]))]
    later = np.zeros(len(order), dtype=bool)
    later[1:] = particle_id[order][1:] == particle_id[order][:-1]
    duplicate[order[later]] = True
    return duplicate
