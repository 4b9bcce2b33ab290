"""The TrackML detector description and the transforms between global and module frames.

Each module ``m`` is a planar trapezoid with centre ``c_m`` and rotation ``R_m`` whose columns
are the local axes u, v, w in global coordinates, so that

    x_global = R_m @ (u, v, w) + c_m,        (u, v, w) = R_m^T @ (x_global - c_m).

The sensitive area is ``|v| <= hv`` and ``|u| <= hu(v)`` with the half-width growing linearly
from ``minhu`` at ``v = -hv`` to ``maxhu`` at ``v = +hv``; the module is ``thickness`` thick
along w. Cells (pixels or strips) sit on a grid of pitch ``(pitch_u, pitch_v)``; the centre of
cell ``(ch0, ch1)`` is

    u = (ch0 + 1/2) pitch_u - maxhu,        v = (ch1 + 1/2) pitch_v - hv.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

from trkx.files.errors import TrackMLFormatError

#: TrackML's pixel volumes (barrel 8, endcaps 7 and 9).
PIXEL_VOLUMES: tuple[int, ...] = (7, 8, 9)
#: Each volume's group: a barrel, or both endcaps of a subdetector under the id of the one at
#: negative z (pixels 7 / 8, short strips 12 / 13, long strips 16 / 17).
VOLUME_GROUP: dict[int, int] = {7: 7, 9: 7, 8: 8, 12: 12, 14: 12, 13: 13, 16: 16, 18: 16, 17: 17}
#: The barrels' groups: a track crosses their modules at incidence ``sin(theta)``, the disks'
#: at ``|cos(theta)|``.
BARREL_GROUPS: tuple[int, ...] = (8, 13, 17)

_ROTATION_COLUMNS = [f"rot_{g}{loc}" for g in "xyz" for loc in "uvw"]
_COLUMNS = ["volume_id", "layer_id", "module_id", "cx", "cy", "cz", *_ROTATION_COLUMNS,
            "module_t", "module_minhu", "module_maxhu", "module_hv", "pitch_u", "pitch_v"]


def _module_key(volume: np.ndarray, layer: np.ndarray, module: np.ndarray) -> np.ndarray:
    """One int64 per (volume, layer, module): volume * 1e8 + layer * 1e5 + module."""
    return (np.asarray(volume, dtype=np.int64) * 100_000_000
            + np.asarray(layer, dtype=np.int64) * 100_000
            + np.asarray(module, dtype=np.int64))


@dataclass(frozen=True, eq=False)
class Detector:
    """Arrays over modules (length M) describing the detector; see the module docstring."""

    volume_id: np.ndarray      # [M] int32
    layer_id: np.ndarray       # [M] int32
    module_id: np.ndarray      # [M] int32
    center: np.ndarray         # [M, 3] float64, mm
    rotation: np.ndarray       # [M, 3, 3] float64, columns = local u, v, w in global frame
    thickness: np.ndarray      # [M] float64, mm
    min_hu: np.ndarray         # [M] float64, half-width at v = -hv
    max_hu: np.ndarray         # [M] float64, half-width at v = +hv
    hv: np.ndarray             # [M] float64, half-length along v
    pitch_u: np.ndarray        # [M] float64
    pitch_v: np.ndarray        # [M] float64

    @property
    def n_modules(self) -> int:
        return int(self.volume_id.shape[0])

    @functools.cached_property
    def _sorted_keys(self) -> tuple[np.ndarray, np.ndarray]:
        keys = _module_key(self.volume_id, self.layer_id, self.module_id)
        order = np.argsort(keys, kind="stable")
        return keys[order], order

    def module_index(self, volume: np.ndarray, layer: np.ndarray, module: np.ndarray,
                     strict: bool = True) -> np.ndarray:
        """Row index of each (volume, layer, module); -1 (or an error if strict) if unknown."""
        keys = _module_key(volume, layer, module)
        sorted_keys, order = self._sorted_keys
        pos = np.clip(np.searchsorted(sorted_keys, keys), 0, len(sorted_keys) - 1)
        found = sorted_keys[pos] == keys
        index = np.where(found, order[pos], -1)
        if strict and not found.all():
            bad = int(np.flatnonzero(~found)[0])
            raise KeyError(
                f"module (volume {np.ravel(volume)[bad]}, layer {np.ravel(layer)[bad]}, "
                f"module {np.ravel(module)[bad]}) is not in the detector description"
            )
        return index

    def global_to_local(self, index: np.ndarray, xyz: np.ndarray) -> np.ndarray:
        """Local (u, v, w) of global points ``xyz`` [K, 3] on modules ``index`` [K]."""
        delta = np.asarray(xyz, dtype=np.float64) - self.center[index]
        return np.einsum("kji,kj->ki", self.rotation[index], delta)

    def local_to_global(self, index: np.ndarray, uvw: np.ndarray) -> np.ndarray:
        """Global (x, y, z) of local points ``uvw`` [K, 3] (or [K, 2], w = 0)."""
        uvw = np.asarray(uvw, dtype=np.float64)
        if uvw.shape[-1] == 2:
            uvw = np.concatenate([uvw, np.zeros_like(uvw[..., :1])], axis=-1)
        return np.einsum("kij,kj->ki", self.rotation[index], uvw) + self.center[index]

    def half_width(self, index: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Half-width ``hu(v)`` of the trapezoid at local ``v``."""
        t = (np.asarray(v, dtype=np.float64) + self.hv[index]) / (2.0 * self.hv[index])
        return self.min_hu[index] + t * (self.max_hu[index] - self.min_hu[index])

    def contains(self, index: np.ndarray, u: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Whether local points (u, v) lie inside the trapezoid of their module."""
        v = np.asarray(v, dtype=np.float64)
        return (np.abs(v) <= self.hv[index]) & (np.abs(u) <= self.half_width(index, v))

    def cell_center(self, index: np.ndarray, ch0: np.ndarray, ch1: np.ndarray,
                    ) -> tuple[np.ndarray, np.ndarray]:
        """Local (u, v) of the centre of cell (ch0, ch1) on modules ``index``."""
        u = (np.asarray(ch0, dtype=np.float64) + 0.5) * self.pitch_u[index] - self.max_hu[index]
        v = (np.asarray(ch1, dtype=np.float64) + 0.5) * self.pitch_v[index] - self.hv[index]
        return u, v

    def cell_of(self, index: np.ndarray, u: np.ndarray, v: np.ndarray,
                ) -> tuple[np.ndarray, np.ndarray]:
        """Channels (ch0, ch1) of the cell that contains local (u, v)."""
        ch0 = np.floor((np.asarray(u) + self.max_hu[index]) / self.pitch_u[index])
        ch1 = np.floor((np.asarray(v) + self.hv[index]) / self.pitch_v[index])
        return ch0.astype(np.int64), ch1.astype(np.int64)

    def to_frame(self) -> pd.DataFrame:
        """The description as a table with the columns of ``detectors.csv``."""
        table = {"volume_id": self.volume_id, "layer_id": self.layer_id,
                 "module_id": self.module_id, "cx": self.center[:, 0],
                 "cy": self.center[:, 1], "cz": self.center[:, 2]}
        for name in _ROTATION_COLUMNS:
            table[name] = self.rotation[:, "xyz".index(name[4]), "uvw".index(name[5])]
        table.update(module_t=self.thickness, module_minhu=self.min_hu,
                     module_maxhu=self.max_hu, module_hv=self.hv, pitch_u=self.pitch_u,
                     pitch_v=self.pitch_v)
        return pd.DataFrame(table)


def detector_from_frame(frame: pd.DataFrame, label: str = "detector table") -> Detector:
    """Build a :class:`Detector` from a table with the columns of ``detectors.csv``."""
    missing = [c for c in _COLUMNS if c not in frame.columns]
    if missing:
        raise TrackMLFormatError(f"{label}: missing column(s) {', '.join(missing)}")
    values = frame[_COLUMNS].apply(pd.to_numeric, errors="coerce")
    if values.isna().any().any():
        column = values.columns[values.isna().any()][0]
        row = int(np.flatnonzero(values[column].isna().to_numpy())[0])
        raise TrackMLFormatError(f"{label}: bad value in column {column!r} at line {row + 2}")
    rotation = np.stack([values[c].to_numpy(np.float64) for c in _ROTATION_COLUMNS], axis=1)
    f64 = lambda name: values[name].to_numpy(np.float64)
    return Detector(
        volume_id=values["volume_id"].to_numpy(np.int32),
        layer_id=values["layer_id"].to_numpy(np.int32),
        module_id=values["module_id"].to_numpy(np.int32),
        center=values[["cx", "cy", "cz"]].to_numpy(np.float64),
        rotation=rotation.reshape(-1, 3, 3),
        thickness=f64("module_t"), min_hu=f64("module_minhu"), max_hu=f64("module_maxhu"),
        hv=f64("module_hv"), pitch_u=f64("pitch_u"), pitch_v=f64("pitch_v"),
    )


def default_detector_path() -> Path:
    """Path of the packaged TrackML ``detectors.csv.gz``."""
    return Path(str(resources.files("trkx.data") / "resources" / "detectors.csv.gz"))


@functools.lru_cache(maxsize=4)
def load_detector(path: str | os.PathLike | None = None) -> Detector:
    """Load a detector description (default: the packaged TrackML detector). Cached."""
    path = default_detector_path() if path is None else Path(path)
    if not path.is_file():
        raise TrackMLFormatError(f"{path}: no such detector file")
    return detector_from_frame(pd.read_csv(path), str(path))
