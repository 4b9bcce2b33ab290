"""The efficiency and fake rate of a working point from one evaluation of the candidates.

Over the candidate tracks ``t`` of the validation events (trkx.tracks.tune.tuning, its module
docstring), each with its length ``n_t``, region, mean edge score ``s_t``, qualities ``q_t``,
``q'_t``, whether it is matched and the (event, signal particle) it finds, a working point
keeps

    keep_t = (n_t >= L(region_t) or s_t >= sigma) and q_t >= kappa
             or (3 <= n_t < L(region_t) and q'_t >= lambda)

(``sigma`` and ``lambda`` exclusive), and

    efficiency = #{(event, p) : some kept t finds p} / #signal,
    fake_rate  = #{t : keep_t, t unmatched} / #{t : keep_t}.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class LengthTable:
    """The columns of a candidates' table (:func:`_track_table`, any number of events) that
    :func:`length_figures` reads, as arrays, made once for the many working points scored on
    it; ``signal_key`` numbers each (event, signal particle) pair found by some candidate
    (-1: the candidate finds none), so that the particles found by the kept candidates are
    the distinct keys among them."""

    n_hits: np.ndarray
    abs_eta: np.ndarray
    matched: np.ndarray
    mean_score: np.ndarray
    quality: np.ndarray
    short_quality: np.ndarray | None
    signal_key: np.ndarray
    n_keys: int

    @classmethod
    def of(cls, table: pd.DataFrame) -> LengthTable:
        event = table["event"].to_numpy(np.int64)
        particle = table["signal_pid"].to_numpy(np.int64)
        rows = np.flatnonzero(particle != 0)
        order = rows[np.lexsort((particle[rows], event[rows]))]
        first = np.ones(len(order), dtype=bool)
        first[1:] = (event[order][1:] != event[order][:-1]) | (
            particle[order][1:] != particle[order][:-1])
        key = np.full(len(table), -1, dtype=np.int64)
        key[order] = np.cumsum(first) - 1
        return cls(table["n_hits"].to_numpy(), table["abs_eta"].to_numpy(),
                   table["matched"].to_numpy(bool), table["mean_score"].to_numpy(),
                   table["quality"].to_numpy(),
                   table["short_quality"].to_numpy() if "short_quality" in table else None,
                   key, int(first.sum()))


def length_figures(table: pd.DataFrame | LengthTable, n_signal: int, central: int,
                   forward: int, forward_eta: float, short_score: float | None = None,
                   quality_cut: float | None = None,
                   short_quality_cut: float | None = None) -> tuple[float, float]:
    """Efficiency and fake rate of the tracks of ``table`` kept at lengths (central, forward),
    ``short_score``, ``quality_cut`` and ``short_quality_cut`` (the module docstring's
    formulas; the last reads the table's ``short_quality``)."""
    if not isinstance(table, LengthTable):
        table = LengthTable.of(table)
    need = np.where(table.abs_eta >= forward_eta, forward, central)
    keep = table.n_hits >= need
    spared = np.zeros(len(keep), dtype=bool)
    if short_quality_cut is not None:
        spared = ~keep & (table.n_hits >= 3) & (table.short_quality >= short_quality_cut)
    elif short_score is not None:
        keep |= table.mean_score >= short_score
    if quality_cut is not None:
        keep &= table.quality >= quality_cut
    keep |= spared
    found = table.signal_key[keep]
    n_found = int(np.count_nonzero(np.bincount(found[found >= 0], minlength=table.n_keys)))
    n_kept = int(keep.sum())
    fakes = int((keep & ~table.matched).sum())
    efficiency = n_found / n_signal if n_signal else float("nan")
    return efficiency, (fakes / n_kept if n_kept else float("nan"))
