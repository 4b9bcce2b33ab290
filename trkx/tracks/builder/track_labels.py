"""Operations on per-hit track labels: compact ids, short tracks dissolved, each track's mean
edge score (trkx.tracks.builder.building's steps, and the tuner's figures of them), and the
submission table of an event's labels."""

from __future__ import annotations

import numpy as np
import pandas as pd


def track_mean_score(labels: np.ndarray, src: np.ndarray, dst: np.ndarray,
                     score: np.ndarray) -> np.ndarray:
    """Per hit, the mean score ``s_t`` of the edges ``(src, dst)`` that join two hits of its
    track (module docstring); 0 for a track that no edge joins."""
    labels = np.asarray(labels, dtype=np.int64)
    _, inverse = np.unique(labels, return_inverse=True)
    inverse = inverse.reshape(-1)
    inside = inverse[src] == inverse[dst]
    n_tracks = int(inverse.max()) + 1 if len(inverse) else 0
    total = np.bincount(inverse[src[inside]], weights=score[inside], minlength=n_tracks)
    count = np.bincount(inverse[src[inside]], minlength=n_tracks)
    return (total / np.maximum(count, 1))[inverse]


def dissolve_short(labels: np.ndarray, min_length: int, min_length_forward: int | None = None,
                   forward_eta: float = 2.0, hit_eta: np.ndarray | None = None,
                   sure: np.ndarray | None = None) -> np.ndarray:
    """Give every hit of a track with fewer than ``L(t)`` hits (module docstring) a track id
    of its own: ``min_length``, or ``min_length_forward`` for a track whose mean ``hit_eta``
    has ``|eta_t| >= forward_eta`` (when both are given); except the tracks of >= 3 hits
    whose hits are ``sure`` (per hit, the same over a track: ``s_t >= short_score``)."""
    if len(labels) == 0:
        return labels
    _, inverse, counts = np.unique(labels, return_inverse=True, return_counts=True)
    inverse = inverse.reshape(-1)
    length = np.full(len(counts), min_length, dtype=np.int64)
    if min_length_forward is not None and hit_eta is not None:
        track_eta = np.bincount(inverse, weights=hit_eta, minlength=len(counts)) / counts
        length[np.abs(track_eta) >= forward_eta] = min_length_forward
    if length.max() <= 1:
        return labels
    short = counts[inverse] < length[inverse]
    if sure is not None:
        short &= ~(np.asarray(sure, dtype=bool) & (counts[inverse] >= 3))
    out = np.asarray(labels, dtype=np.int64).copy()
    out[short] = out.max() + 1 + np.arange(int(short.sum()))
    return out


def compact_labels(labels: np.ndarray) -> np.ndarray:
    """Relabel to 0..T-1 in order of first appearance."""
    _, first, inverse = np.unique(labels, return_index=True, return_inverse=True)
    rank = np.empty(len(first), dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(len(first))
    return rank[inverse.reshape(-1)]


def tracks_frame(hit_id, track_id: np.ndarray, event_id: int) -> pd.DataFrame:
    """The submission table ``event_id, hit_id, track_id`` of one event."""
    hit_id = hit_id.detach().cpu().numpy() if hasattr(hit_id, "detach") else np.asarray(hit_id)
    if len(hit_id) != len(track_id):
        raise ValueError(f"{len(track_id)} track ids for {len(hit_id)} hits")
    return pd.DataFrame({"event_id": np.full(len(hit_id), int(event_id), dtype=np.int64),
                         "hit_id": hit_id.astype(np.int64),
                         "track_id": np.asarray(track_id, dtype=np.int64)})
