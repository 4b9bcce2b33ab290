"""Hit features: cylindrical coordinates and the cluster-shape features of the cells.

Position features of hit ``(x, y, z)``:

    r = sqrt(x^2 + y^2),  phi = atan2(y, x),  eta = asinh(z / r)   (from the origin),
    model input (r / 1000, phi / pi, z / 1000)                      (mm -> O(1)).

Cell features of a cluster of ``n`` cells spanning ``n_u`` columns and ``n_v`` rows on a module
of thickness ``t`` and pitches ``(p_u, p_v)`` (the Exa.TrkX cluster-shape recipe):

    cell_count = n,   cell_charge = sum of cell values,
    extent_u = n_u p_u,   extent_v = n_v p_v                        (mm),
    local direction d_loc = (extent_u, extent_v, 2 t):
        alpha = atan2(extent_u, extent_v),  beta = atan2(|(extent_u, extent_v)|, 2 t),
    global direction d = R d_loc (sign chosen to point away from the beam line):
        dir_eta = asinh(d_z / |d_xy|),  dir_phi = atan2(d_y, d_x).

The cluster shape measures the track's crossing angle in the silicon, which the filter compares
with the direction of a candidate edge. Column order: (r, phi, z), the six shape features, then
cell_count and cell_charge, so ``in_features`` = 3 (positions), 9 (and the shape) or 11 (all).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from trkx.data.detector import Detector

POSITION_FEATURES: tuple[str, ...] = ("r", "phi", "z")
#: The cluster's shape: what the crossing angle makes of it, which simulation and real data
#: share (charge and cell count depend on thresholds and gains, so they come last: a model that
#: reads the leading 3 + len(SHAPE_FEATURES) columns sees positions and shape only).
SHAPE_FEATURES: tuple[str, ...] = ("extent_u", "extent_v", "dir_alpha", "dir_beta", "dir_eta",
                                   "dir_phi")
CELL_FEATURES: tuple[str, ...] = (*SHAPE_FEATURES, "cell_count", "cell_charge")
#: Scale applied to each model input column so that typical values are O(1).
FEATURE_SCALES: dict[str, float] = {
    "r": 1000.0, "phi": np.pi, "z": 1000.0, "cell_count": 10.0, "cell_charge": 1.0,
    "extent_u": 1.0, "extent_v": 1.0, "dir_alpha": np.pi, "dir_beta": np.pi,
    "dir_eta": 4.0, "dir_phi": np.pi,
    "eta": 3.0,   # not a column: the hit pseudorapidity that the embedding computes from r, z
}


def cylindrical(x: np.ndarray, y: np.ndarray, z: np.ndarray,
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(r, phi, z, eta) of global points (float64)."""
    x, y, z = (np.asarray(a, dtype=np.float64) for a in (x, y, z))
    r = np.hypot(x, y)
    return r, np.arctan2(y, x), z, np.arcsinh(z / np.maximum(r, 1e-9))


def cell_features(hits: pd.DataFrame, cells: pd.DataFrame, detector: Detector) -> pd.DataFrame:
    """The cluster-shape features of every hit (rows aligned with ``hits``).

    Hits without cells get zeros (count 0), so a missing cluster is visible to the model.
    """
    hit_ids = hits["hit_id"].to_numpy()
    stats = (cells.groupby("hit_id")
             .agg(cell_count=("value", "size"), cell_charge=("value", "sum"),
                  ch0_min=("ch0", "min"), ch0_max=("ch0", "max"),
                  ch1_min=("ch1", "min"), ch1_max=("ch1", "max"))
             .reindex(hit_ids))
    has_cells = stats["cell_count"].notna().to_numpy()
    stats = stats.fillna(0)
    module = detector.module_index(hits["volume_id"].to_numpy(), hits["layer_id"].to_numpy(),
                                   hits["module_id"].to_numpy())
    n_u = (stats["ch0_max"] - stats["ch0_min"] + 1).to_numpy(np.float64)
    n_v = (stats["ch1_max"] - stats["ch1_min"] + 1).to_numpy(np.float64)
    extent_u = np.where(has_cells, n_u * detector.pitch_u[module], 0.0)
    extent_v = np.where(has_cells, n_v * detector.pitch_v[module], 0.0)
    depth = 2.0 * detector.thickness[module]
    local = np.stack([extent_u, extent_v, depth], axis=1)
    direction = np.einsum("kij,kj->ki", detector.rotation[module], local)
    position = hits[["x", "y"]].to_numpy(np.float64)
    outward = np.sign(np.einsum("ki,ki->k", direction[:, :2], position))
    direction *= np.where(outward == 0, 1.0, outward)[:, None]
    transverse = np.hypot(direction[:, 0], direction[:, 1])
    frame = pd.DataFrame({
        "cell_count": stats["cell_count"].to_numpy(np.float64),
        "cell_charge": stats["cell_charge"].to_numpy(np.float64),
        "extent_u": extent_u,
        "extent_v": extent_v,
        "dir_alpha": np.arctan2(extent_u, extent_v),
        "dir_beta": np.arctan2(np.hypot(extent_u, extent_v), depth),
        "dir_eta": np.arcsinh(direction[:, 2] / np.maximum(transverse, 1e-9)),
        "dir_phi": np.arctan2(direction[:, 1], direction[:, 0]),
    })
    frame.loc[~has_cells, list(CELL_FEATURES)] = 0.0
    return frame


def hit_features(hits: pd.DataFrame, cells: pd.DataFrame | None = None,
                 detector: Detector | None = None, use_cells: bool = True,
                 ) -> tuple[np.ndarray, list[str]]:
    """Model input ``x`` [N, F] (float32, scaled) and the feature names.

    With ``use_cells`` and a cells table, the cell features follow the position features;
    without cells (``cells is None`` or ``use_cells=False``) only (r, phi, z) are used.
    """
    r, phi, z, _ = cylindrical(hits["x"], hits["y"], hits["z"])
    columns = {"r": r, "phi": phi, "z": z}
    if use_cells and cells is not None:
        if detector is None:
            raise ValueError("cell features need the detector description")
        shape = cell_features(hits, cells, detector)
        columns.update({name: shape[name].to_numpy() for name in CELL_FEATURES})
    names = list(columns)
    x = np.stack([columns[n] / FEATURE_SCALES[n] for n in names], axis=1).astype(np.float32)
    return x, names
