"""Tensors and arrays: the one conversion the numpy-side code (tracks, evaluation) uses."""

from __future__ import annotations

import numpy as np


def as_numpy(value) -> np.ndarray:
    """``value`` as a numpy array: a tensor is detached and moved to the CPU first."""
    return value.detach().cpu().numpy() if hasattr(value, "detach") else np.asarray(value)
