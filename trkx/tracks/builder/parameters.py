"""Each built track's parameters: the table written beside ``eventNNNNNNNNN-tracks.csv``.

One row per track of >= 3 hits (the fewest a track is evaluated with) of the final track ids
``labels`` of a scored event graph record: ``track_id, n_hits, pt, eta, phi, d0, z0, charge``
from the helix fit of its hits in the builder's ``field_map`` (trkx.tracks.fit.field_map, the
TrackML solenoid by default; GeV, rad, mm; ``phi`` and ``d0`` at the closest approach to the
beam line, ``z0`` the z there, pT in the field there); ``chi2_ndf`` with the hits' resolutions
and the multiple scattering (trkx.tracks.fit.covariance); ``quality`` ``q_t``
(trkx.tracks.fit.quality) when the builder has a quality model, else empty; then the
parameters' one-sigma errors ``pt_err, eta_err, phi_err, d0_err, z0_err``. The ``track_id`` is
the one of the tracks file.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from trkx.arrays import as_numpy
from trkx.tracks.builder.building import TrackBuilder
from trkx.tracks.builder.graph import graph_from_record
from trkx.tracks.fit.covariance import ERROR_COLUMNS, calibrated_fit
from trkx.tracks.fit.field_map import fit_in_field_with_hits
from trkx.tracks.fit.track_table import track_table

COLUMNS: tuple[str, ...] = ("track_id", "n_hits", "pt", "eta", "phi", "d0", "z0", "charge",
                            "chi2_ndf", "quality")
#: The columns the calibrated fit gives anew (trkx.tracks.fit.covariance).
FITTED: tuple[str, ...] = ("pt", "eta", "phi", "d0", "z0", "charge", "chi2_ndf")
PARAMETERS_SUFFIX = "-parameters.csv"
PARAMETERS_FILE = re.compile(r"^event(\d{9})-parameters\.csv$")


def track_parameters(record, labels: np.ndarray, builder: TrackBuilder,
                     table: pd.DataFrame | None = None) -> pd.DataFrame:
    """The module docstring's table for ``labels`` (one track id per hit of ``record``, which
    carries ``pos``, ``volume_id``, ``layer_id``, ``edge_index`` and ``scores``); ``table``,
    the builder's own track table of these tracks when it made one
    (:meth:`TrackBuilder.build_with_table`), gives the hit counts and quality without the
    builder's table being made again; the helix is fitted anew in the builder's field map."""
    pos, volume_id = as_numpy(record.pos), as_numpy(record.volume_id)
    if table is not None:
        table = table[list(COLUMNS)].reset_index(drop=True)
    else:
        graph = graph_from_record(record, min_score=builder.edge_cut)
        table = track_table(labels, pos, volume_id, as_numpy(record.layer_id), graph.src,
                            graph.dst, graph.score)
        table = table[table["n_hits"].to_numpy() >= 3].reset_index(drop=True)
        table["quality"] = (builder.quality.score(table) if builder.quality is not None
                            else np.nan)
    return _in_field(table, labels, pos, volume_id, as_numpy(record.layer_id),
                     builder.field_map)[[*COLUMNS, *ERROR_COLUMNS]]


def _in_field(table: pd.DataFrame, labels: np.ndarray, pos: np.ndarray, volume_id: np.ndarray,
              layer_id: np.ndarray, field_map: str) -> pd.DataFrame:
    """``table`` with the helix parameters of the fit in ``field_map``
    (trkx.tracks.fit.field_map), its chi2 / ndf and errors with the multiple scattering
    (trkx.tracks.fit.covariance); the tracks, their hit counts and quality stay."""
    pos = np.asarray(pos, dtype=np.float64)
    r, phi = pos[:, 0], pos[:, 1]
    x, y, z = r * np.cos(phi), r * np.sin(phi), pos[:, 2]
    ids = np.where(np.isin(labels, table["track_id"].to_numpy()), labels, -1)
    fit, moved_x, moved_y = fit_in_field_with_hits(ids, x, y, z, volume_id, field_map)
    calibrated = calibrated_fit(fit, ids, moved_x, moved_y, z, volume_id, layer_id, field_map)
    row = np.searchsorted(calibrated.track_id, table["track_id"].to_numpy())
    table = table.copy()
    for column in (*FITTED, *ERROR_COLUMNS):
        table[column] = getattr(calibrated, column)[row]
    return table


def parameters_file_name(event_id: int) -> str:
    """``eventNNNNNNNNN-parameters.csv``."""
    return f"event{event_id:09d}{PARAMETERS_SUFFIX}"
