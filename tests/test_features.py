"""Hit features: cylindrical coordinates and cluster-shape features."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from trkx.data.detector import load_detector
from trkx.data.features import (
    CELL_FEATURES,
    SHAPE_FEATURES,
    cell_features,
    cylindrical,
    hit_features,
)
from trkx.data.io import load_event


def test_cylindrical_coordinates() -> None:
    r, phi, _, eta = cylindrical(np.array([3.0, 0.0]), np.array([4.0, -2.0]),
                                 np.array([0.0, 2.0]))
    assert r == pytest.approx([5.0, 2.0])
    assert phi == pytest.approx([np.arctan2(4, 3), -np.pi / 2])
    assert eta == pytest.approx([0.0, np.arcsinh(1.0)])


def test_cluster_shape_of_a_hand_made_cluster() -> None:
    detector = load_detector()
    module = 0  # volume 7, layer 2, module 1: pitch 0.05 x 0.05625, thickness 0.15
    hits = pd.DataFrame({"hit_id": [1, 2], "x": [-65.8, -60.0], "y": [-5.2, -5.0],
                         "z": [-1502.5, -1502.5], "volume_id": [7, 7], "layer_id": [2, 2],
                         "module_id": [1, 1]})
    cells = pd.DataFrame({"hit_id": [1, 1, 1], "ch0": [10, 11, 12], "ch1": [5, 5, 6],
                          "value": [0.2, 0.3, 0.1]})
    shape = cell_features(hits, cells, detector)
    assert shape.loc[0, "cell_count"] == 3
    assert shape.loc[0, "cell_charge"] == pytest.approx(0.6)
    assert shape.loc[0, "extent_u"] == pytest.approx(3 * detector.pitch_u[module])
    assert shape.loc[0, "extent_v"] == pytest.approx(2 * detector.pitch_v[module])
    assert shape.loc[0, "dir_beta"] == pytest.approx(
        np.arctan2(np.hypot(0.15, 0.1125), 0.3))
    assert (shape.loc[1, list(CELL_FEATURES)] == 0).all()  # no cells: zeros


def test_features_with_and_without_cells(sample_prefix: Path) -> None:
    hits, cells = load_event(sample_prefix, ["hits", "cells"])
    x, names = hit_features(hits, cells, load_detector())
    assert names[:3] == ["r", "phi", "z"] and len(names) == 3 + len(CELL_FEATURES)
    # the shape leads the cell columns: a model of 9 inputs reads positions and shape only
    assert tuple(names[3:9]) == SHAPE_FEATURES and names[9:] == ["cell_count", "cell_charge"]
    assert np.isfinite(x).all() and np.abs(x).max() < 50
    x3, names3 = hit_features(hits, cells, load_detector(), use_cells=False)
    assert names3 == ["r", "phi", "z"] and np.array_equal(x3, x[:, :3])
    shape = pd.DataFrame(x[:, 3:], columns=list(CELL_FEATURES))
    assert (shape["cell_count"] > 0).all()  # every real hit has its cluster
    with pytest.raises(ValueError, match="detector"):
        hit_features(hits, cells, None)
