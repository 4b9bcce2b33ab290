"""Per-track table of a built event: the helix parameters and the figures a quality cut reads.

For tracks ``t`` (one id per hit, ``labels``) on the scored graph ``G`` restricted to the edges
the builder followed (``s_ij >= cut``):

- ``n_hits``, ``n_layers`` = distinct (volume, layer) of its hits, and
  ``layer_repeats = n_hits - n_layers`` (overlapping modules, or a second particle's hits);
- ``mean_score`` ``s_t`` (trkx.tracks.builder.track_labels.track_mean_score) and ``min_score`` over
the
  edges of ``G`` inside ``t`` (1 when none);
- ``leaving`` = edges of ``G`` with one end in ``t`` and the other in another track, per hit
  of ``t``: a junction where the walk chose between two particles;
- the helix fit of its hits (trkx.tracks.fit.helix_fit): ``pt, eta, phi, d0, z0, charge,
  chi2_ndf``, and the residual RMS ``rms_xy``, ``rms_z`` (mm);
- what the short-track model reads beyond the fit (trkx.tracks.fit.short_inputs): ``pt_beamline``,
  the pT of the circle through the beam line, and for tracks of 3 to
  ``CONTINUATION_MAX_HITS - 1`` hits ``ahead`` / ``behind``, the layers where its helix goes
  on into hits not its own (0 for the others).

Hits at ``pos = (r, phi, z)``. Vectorised over tracks (``np.bincount``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from trkx.tracks.fit.helix_fit import fit_helices
from trkx.tracks.fit.short_inputs import CONTINUATION_MAX_HITS, beamline_pt, continuation


def distinct_layers(track: np.ndarray, layer_key: np.ndarray, n_tracks: int) -> np.ndarray:
    """Per track 0..n_tracks-1, the distinct layer keys (non-negative) of its hits."""
    if len(track) == 0:
        return np.zeros(n_tracks, np.int64)
    span = int(layer_key.max()) + 1
    pairs = np.unique(np.asarray(track, np.int64) * span + layer_key)
    return np.bincount(pairs // span, minlength=n_tracks)


def track_table(labels: np.ndarray, pos: np.ndarray, volume_id: np.ndarray,
                layer_id: np.ndarray, src: np.ndarray, dst: np.ndarray, score: np.ndarray,
                ) -> pd.DataFrame:
    """One row per track id of ``labels`` (ascending), the module docstring's columns;
    ``(src, dst, score)`` are the graph edges above the builder's cut. A hit of negative id
    belongs to no track: it is not fitted, and an edge to it leaves its other end's track."""
    labels = np.asarray(labels, dtype=np.int64)
    pos = np.asarray(pos, dtype=np.float64)
    x, y = pos[:, 0] * np.cos(pos[:, 1]), pos[:, 0] * np.sin(pos[:, 1])
    volume_id = np.asarray(volume_id, dtype=np.int64)
    fit = fit_helices(labels, x, y, pos[:, 2], volume_id)
    ids = fit.track_id
    tracked = labels >= 0
    inverse = np.where(tracked, np.searchsorted(ids, labels), -1)
    n_tracks = len(ids)

    layer_key = volume_id * 1000 + np.asarray(layer_id, dtype=np.int64)
    n_layers = distinct_layers(inverse[tracked], layer_key[tracked], n_tracks)

    src, dst = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
    score = np.asarray(score, dtype=np.float64)
    inside = (inverse[src] == inverse[dst]) & (inverse[src] >= 0)
    owner = inverse[src[inside]]
    n_edges = np.bincount(owner, minlength=n_tracks)
    mean_score = np.bincount(owner, weights=score[inside], minlength=n_tracks) / np.maximum(
        n_edges, 1)
    min_score = np.ones(n_tracks)
    np.minimum.at(min_score, owner, score[inside])
    ends = np.concatenate([inverse[src[~inside]], inverse[dst[~inside]]])
    leaving = np.bincount(ends[ends >= 0], minlength=n_tracks)
    helices = fit.frame()
    short = (fit.n_hits >= 3) & (fit.n_hits < CONTINUATION_MAX_HITS)
    ahead, behind = np.zeros(n_tracks, np.int64), np.zeros(n_tracks, np.int64)
    ahead[short], behind[short] = continuation(labels, pos, layer_key, helices[short])
    return pd.DataFrame({
        "track_id": ids, "n_hits": fit.n_hits, "n_layers": n_layers,
        "layer_repeats": fit.n_hits - n_layers, "n_edges": n_edges,
        "mean_score": mean_score, "min_score": min_score,
        "leaving": leaving / np.maximum(fit.n_hits, 1),
        "pt": fit.pt, "eta": fit.eta, "phi": fit.phi, "d0": fit.d0, "z0": fit.z0,
        "charge": fit.charge, "chi2_ndf": fit.chi2_ndf, "rms_xy": fit.rms_xy,
        "rms_z": fit.rms_z,
        "pt_beamline": beamline_pt(inverse[tracked], n_tracks, x[tracked], y[tracked]),
        "ahead": ahead, "behind": behind})


def refit_rows(table: pd.DataFrame, labels: np.ndarray, x: np.ndarray, y: np.ndarray,
               z: np.ndarray, layer: np.ndarray, track_ids: np.ndarray) -> pd.DataFrame:
    """``table`` (trkx.tracks.fit.track_table) with the rows of ``track_ids`` fitted again on
    their hits in ``labels``: hit and layer counts and the helix; the edge figures and the
    quality stay those the track was judged by."""
    chosen = np.isin(labels, track_ids)
    fit = fit_helices(np.where(chosen, labels, -1), x, y, z, layer // 1000)
    n_layers = distinct_layers(np.searchsorted(fit.track_id, labels[chosen]),
                               np.asarray(layer)[chosen], len(fit.track_id))
    fresh = fit.frame().assign(n_layers=n_layers, rms_xy=fit.rms_xy, rms_z=fit.rms_z)
    fresh["layer_repeats"] = fresh["n_hits"] - fresh["n_layers"]
    table = table.copy()
    rows = np.searchsorted(fresh["track_id"].to_numpy(), table["track_id"].to_numpy())
    hit = np.isin(table["track_id"].to_numpy(), fresh["track_id"].to_numpy())
    for column in fresh.columns.drop("track_id"):
        values = table[column].to_numpy().copy()
        values[hit] = fresh[column].to_numpy()[rows[hit]]
        table[column] = values
    return table
