"""The packaged TrackML detector: contents, frame transforms and cells on the real event."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from trkx.data.detector import default_detector_path, load_detector
from trkx.data.io import load_event


def test_packaged_detector_contents() -> None:
    detector = load_detector()
    assert default_detector_path().is_file()
    assert detector.n_modules == 18_728
    assert len(np.unique(detector.volume_id)) == 9
    assert len(set(zip(detector.volume_id, detector.layer_id))) == 48
    # rotations are orthonormal
    gram = np.einsum("mji,mjk->mik", detector.rotation, detector.rotation)
    assert np.allclose(gram, np.eye(3), atol=1e-5)


def test_global_local_round_trip() -> None:
    detector = load_detector()
    rng = np.random.default_rng(0)
    index = rng.integers(0, detector.n_modules, 500)
    local = rng.normal(size=(500, 3)) * 10
    back = detector.global_to_local(index, detector.local_to_global(index, local))
    assert np.allclose(back, local, atol=1e-9)


def test_unknown_module_is_reported() -> None:
    with pytest.raises(KeyError, match="module 9999"):
        load_detector().module_index(np.array([7]), np.array([2]), np.array([9999]))


def test_real_hits_lie_on_their_modules_and_cells_give_their_position(
        sample_prefix: Path) -> None:
    detector = load_detector()
    hits, cells = load_event(sample_prefix, ["hits", "cells"])
    module = detector.module_index(hits["volume_id"], hits["layer_id"], hits["module_id"])
    local = detector.global_to_local(module, hits[["x", "y", "z"]].to_numpy())
    assert np.abs(local[:, 2]).max() < 0.01                     # on the module plane
    margin = 0.01
    inside = (np.abs(local[:, 1]) <= detector.hv[module] + margin) & (
        np.abs(local[:, 0]) <= detector.half_width(module, local[:, 1]) + margin)
    assert inside.mean() > 0.999
    # charge-weighted centroid of the cells reproduces the hit within a pitch
    row = dict(zip(hits["hit_id"], range(len(hits))))
    cell_module = module[cells["hit_id"].map(row).to_numpy()]
    u, v = detector.cell_center(cell_module, cells["ch0"], cells["ch1"])
    frame = cells.assign(wu=u * cells["value"], wv=v * cells["value"])
    sums = frame.groupby("hit_id")[["wu", "wv", "value"]].sum()
    rows = sums.index.map(row).to_numpy()
    centroid_u = sums["wu"].to_numpy() / sums["value"].to_numpy()
    centroid_v = sums["wv"].to_numpy() / sums["value"].to_numpy()
    pitch_u, pitch_v = detector.pitch_u[module[rows]], detector.pitch_v[module[rows]]
    assert np.mean(np.abs(centroid_u - local[rows, 0]) <= pitch_u) > 0.99
    assert np.mean(np.abs(centroid_v - local[rows, 1]) <= pitch_v) > 0.99
    # and the cell containing the hit position is a cell of the cluster, mostly
    ch0, ch1 = detector.cell_of(module, local[:, 0], local[:, 1])
    assert (ch0 >= 0).all() and (ch1 >= 0).all()
