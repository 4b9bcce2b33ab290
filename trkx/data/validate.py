"""Validation of TrackML event tables: columns, dtypes, values and cross-part references.

Every check raises :class:`TrackMLFormatError` with a message that names the file (``label``),
the column, the CSV line (header = line 1) and the offending value, so a user can open the file
and fix it.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping

import numpy as np
import pandas as pd

from trkx.data.schema import (
    MAX_HIT_COORDINATE_MM,
    NAN_FORBIDDEN,
    OPTIONAL_COLUMNS,
    SCHEMAS,
    UNIQUE_KEYS,
)
from trkx.files.errors import TrackMLFormatError


def _line(row: int) -> int:
    """CSV line number of a 0-based data row (the header is line 1)."""
    return int(row) + 2


def _check_columns(frame: pd.DataFrame, part: str, label: str) -> None:
    schema = SCHEMAS[part]
    present = [str(c) for c in frame.columns]
    missing = [c for c in schema if c not in present and c not in OPTIONAL_COLUMNS[part]]
    if not missing:
        return
    unexpected = [c for c in present if c not in schema]
    hints = []
    for column in missing:
        close = difflib.get_close_matches(column, unexpected, n=1, cutoff=0.6)
        hints.append(f"{column!r} (found {close[0]!r} instead?)" if close else repr(column))
    raise TrackMLFormatError(
        f"{label}: missing column(s) {', '.join(hints)} for the {part} table; "
        f"columns present: {', '.join(present)}"
    )


def _to_numeric(values: pd.Series, column: str, label: str) -> pd.Series:
    if pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values):
        return values
    converted = pd.to_numeric(values, errors="coerce")
    bad = converted.isna() & values.notna()
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        raise TrackMLFormatError(
            f"{label}: non-numeric value {values.iloc[row]!r} in column {column!r} "
            f"at line {_line(row)}"
        )
    return converted


def validate_part(frame: pd.DataFrame, part: str, label: str) -> pd.DataFrame:
    """Check one table and return it with the schema's dtypes (columns in schema order).

    Checks: required columns present (with a spelling hint), numeric values, no NaN in
    positions and weights, integers in integer columns, unique ids; a hits table has rows and
    its coordinates lie within a detector's reach.
    """
    if part not in SCHEMAS:
        raise ValueError(f"unknown event part {part!r}")
    _check_columns(frame, part, label)
    schema = SCHEMAS[part]
    columns = [c for c in schema if c in frame.columns]
    typed = {}
    for column in columns:
        values = _to_numeric(frame[column], column, label)
        dtype = schema[column]
        missing = values.isna().to_numpy()
        if missing.any() and (np.issubdtype(dtype, np.integer)
                              or column in NAN_FORBIDDEN[part]):
            row = int(np.flatnonzero(missing)[0])
            raise TrackMLFormatError(
                f"{label}: empty or NaN value in column {column!r} at line {_line(row)}"
            )
        array = values.to_numpy()
        if np.issubdtype(dtype, np.integer) and np.issubdtype(array.dtype, np.floating):
            fractional = array != np.round(array)
            if fractional.any():
                row = int(np.flatnonzero(fractional)[0])
                raise TrackMLFormatError(
                    f"{label}: non-integer value {array[row]!r} in integer column "
                    f"{column!r} at line {_line(row)}"
                )
        typed[column] = array.astype(dtype, copy=False)
    result = pd.DataFrame(typed)
    for column in NAN_FORBIDDEN[part]:
        if column in result and not np.isfinite(result[column].to_numpy()).all():
            row = int(np.flatnonzero(~np.isfinite(result[column].to_numpy()))[0])
            raise TrackMLFormatError(
                f"{label}: non-finite value {result[column].iloc[row]!r} in column "
                f"{column!r} at line {_line(row)}"
            )
    if part == "hits":
        _check_hit_positions(result, label)
    key = UNIQUE_KEYS[part]
    if key is not None:
        duplicated = result[key].duplicated().to_numpy()
        if duplicated.any():
            row = int(np.flatnonzero(duplicated)[0])
            raise TrackMLFormatError(
                f"{label}: duplicate {key} {int(result[key].iloc[row])} at line {_line(row)}"
            )
    return result


def _check_hit_positions(hits: pd.DataFrame, label: str) -> None:
    """A hits table has rows, and every coordinate within :data:`MAX_HIT_COORDINATE_MM`."""
    if len(hits) == 0:
        raise TrackMLFormatError(f"{label}: no hits (the file holds its header only)")
    for column in ("x", "y", "z"):
        far = np.abs(hits[column].to_numpy()) > MAX_HIT_COORDINATE_MM
        if far.any():
            row = int(np.flatnonzero(far)[0])
            value = float(hits[column].iloc[row])
            raise TrackMLFormatError(
                f"{label}: {column} = {value:g} mm at line {_line(row)} lies beyond any "
                f"detector (|{column}| <= {MAX_HIT_COORDINATE_MM:g} mm)")


def _unknown_reference(ids: np.ndarray, known: np.ndarray) -> int | None:
    """Row of the first entry of ``ids`` absent from ``known``, else None."""
    absent = ~np.isin(ids, known)
    return int(np.flatnonzero(absent)[0]) if absent.any() else None


def validate_event(frames: Mapping[str, pd.DataFrame], label: str,
                   detector: object | None = None) -> None:
    """Cross-part checks of one event.

    truth and cells rows must name hits of the hits table (and truth must cover every hit);
    hits must lie on modules of ``detector`` (a :class:`trkx.data.detector.Detector`).
    """
    hits = frames.get("hits")
    if hits is not None:
        hit_ids = hits["hit_id"].to_numpy()
        for part in ("truth", "cells"):
            if part in frames:
                row = _unknown_reference(frames[part]["hit_id"].to_numpy(), hit_ids)
                if row is not None:
                    raise TrackMLFormatError(
                        f"{label}-{part}: hit_id {int(frames[part]['hit_id'].iloc[row])} at "
                        f"line {_line(row)} is not in the hits table"
                    )
        if "truth" in frames and len(frames["truth"]) != len(hits):
            row = _unknown_reference(hit_ids, frames["truth"]["hit_id"].to_numpy())
            raise TrackMLFormatError(
                f"{label}-truth: has {len(frames['truth'])} rows for {len(hits)} hits; "
                f"hit_id {int(hit_ids[row]) if row is not None else '?'} has no truth row"
            )
        if detector is not None:
            index = detector.module_index(hits["volume_id"].to_numpy(),  # type: ignore[attr-defined]
                                          hits["layer_id"].to_numpy(),
                                          hits["module_id"].to_numpy(), strict=False)
            if (index < 0).any():
                row = int(np.flatnonzero(index < 0)[0])
                module = hits.iloc[row]
                raise TrackMLFormatError(
                    f"{label}-hits: hit_id {int(module['hit_id'])} at line {_line(row)} lies "
                    f"on module (volume {int(module['volume_id'])}, layer "
                    f"{int(module['layer_id'])}, module {int(module['module_id'])}), which is "
                    "not in the detector description"
                )
    if "truth" in frames and "particles" in frames:
        truth_particles = frames["truth"]["particle_id"].to_numpy()
        known = np.append(frames["particles"]["particle_id"].to_numpy(), 0)
        row = _unknown_reference(truth_particles, known)
        if row is not None:
            raise TrackMLFormatError(
                f"{label}-truth: particle_id {int(truth_particles[row])} at line {_line(row)} "
                "is not in the particles table"
            )
