"""Tensors and arrays: the one conversion the numpy-side code (tracks, evaluation) uses."""

from __future__ import annotations

import numpy as np


def as_numpy(value) -> np.ndarray:
    """``value`` as a numpy array: a tensor is detached and moved to the CPU first."""
    return value.detach().cpu().numpy() if hasattr(value, "detach") else np.asarray(value)


def unique_sorted(values: np.ndarray) -> np.ndarray:
    """The distinct values of a 1-D array, ascending: ``np.unique(values)`` by a sort and an
    adjacent compare. numpy >= 2.3 answers a plain ``np.unique`` by hashing, which on the
    millions of int64 pair keys of a pile-up-200 graph (values up to N^2) took 12-15 s against
    0.5-0.7 s for the sort (8M keys, this machine)."""
    ordered = np.sort(np.asarray(values).reshape(-1))
    if ordered.size == 0:
        return ordered
    return ordered[np.concatenate(([True], ordered[1:] != ordered[:-1]))]


def contained(values: np.ndarray, sorted_unique: np.ndarray) -> np.ndarray:
    """``np.isin(values, sorted_unique)`` for an ascending array of distinct values (as
    :func:`unique_sorted` gives), by binary search instead of numpy's hashed unique."""
    values = np.asarray(values)
    if sorted_unique.size == 0:
        return np.zeros(values.shape, dtype=bool)
    where = np.minimum(np.searchsorted(sorted_unique, values), sorted_unique.size - 1)
    return sorted_unique[where] == values
