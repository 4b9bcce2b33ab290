"""The detector as the propagator sees it: one reference surface per layer plus a lookup grid.

Each (volume, layer) becomes one *layer surface*:

* barrel layers (volumes 8, 13, 17) a cylinder ``r = r_ref`` (mean radius of the module
  centres) spanning ``z in [z_min, z_max]`` (module corners);
* endcap layers a disk ``z = z_ref`` (mean z of the module centres) spanning
  ``r in [r_min, r_max]``.

A particle first finds the next layer surface it crosses (cheap: 48 surfaces), then only the few
modules near the crossing point are tested exactly. Candidates come from a grid over
``(phi, z)`` (barrel) or ``(phi, r)`` (endcap): every module is entered in every cell its
corners (widened by ``margin`` mm, which covers the distance between the reference surface and
the tilted or staggered module planes) touch, and each cell lists at most ``K`` modules
(padded with -1). With ``K`` a handful, the exact test costs O(K) per crossing instead of
O(modules in the layer).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from trkx.data.detector import Detector

BARREL_VOLUMES: frozenset[int] = frozenset({8, 13, 17})


@dataclass(frozen=True, eq=False)
class LayerSurfaces:
    """Reference surfaces and candidate grids of all layers (length L arrays)."""

    volume_id: np.ndarray      # [L] int
    layer_id: np.ndarray       # [L] int
    is_barrel: np.ndarray      # [L] bool
    position: np.ndarray       # [L] r_ref (barrel) or z_ref (endcap), mm
    low: np.ndarray            # [L] z_min (barrel) or r_min (endcap), mm
    high: np.ndarray           # [L] z_max (barrel) or r_max (endcap), mm
    n_phi: np.ndarray          # [L] phi bins of the layer's grid
    n_long: np.ndarray         # [L] z (barrel) or r (endcap) bins of the layer's grid
    grid_offset: np.ndarray    # [L] first row of the layer's grid in ``candidates``
    candidates: np.ndarray     # [sum(n_phi * n_long), K] module rows, -1 padded

    @property
    def n_layers(self) -> int:
        return int(self.volume_id.shape[0])

    def candidate_modules(self, layer: np.ndarray, phi: np.ndarray, long: np.ndarray,
                          ) -> np.ndarray:
        """Module rows ``[n, K]`` (-1 padded) near points ``(phi, z or r)`` of ``layer``."""
        n_phi, n_long = self.n_phi[layer], self.n_long[layer]
        i_phi = np.floor((phi + np.pi) / (2 * np.pi) * n_phi).astype(np.int64) % n_phi
        frac = (long - self.low[layer]) / (self.high[layer] - self.low[layer])
        i_long = np.clip(np.floor(frac * n_long).astype(np.int64), 0, n_long - 1)
        return self.candidates[self.grid_offset[layer] + i_phi * n_long + i_long]


def module_corners(detector: Detector) -> np.ndarray:
    """Global corners ``[M, 4, 3]`` of every module's trapezoid."""
    u = np.stack([-detector.min_hu, detector.min_hu, detector.max_hu, -detector.max_hu], 1)
    v = np.stack([-detector.hv, -detector.hv, detector.hv, detector.hv], 1)
    local = np.stack([u, v, np.zeros_like(u)], axis=-1)                  # [M, 4, 3]
    return np.einsum("mij,mkj->mki", detector.rotation, local) + detector.center[:, None, :]


def build_layer_surfaces(detector: Detector, margin: float = 12.0,
                         bins_per_module: float = 1.5) -> LayerSurfaces:
    """Group modules into layer surfaces and fill their candidate grids (see module doc)."""
    corners = module_corners(detector)
    corner_r = np.hypot(corners[..., 0], corners[..., 1])
    corner_phi = np.arctan2(corners[..., 1], corners[..., 0])
    center_phi = np.arctan2(detector.center[:, 1], detector.center[:, 0])
    # corner phi relative to the module centre, unwrapped, widened by the margin
    dphi = (corner_phi - center_phi[:, None] + np.pi) % (2 * np.pi) - np.pi
    keys = np.stack([detector.volume_id, detector.layer_id], 1)
    layers = np.unique(keys, axis=0)
    fields: dict[str, list] = {k: [] for k in ("volume_id", "layer_id", "is_barrel", "position",
                                              "low", "high", "n_phi", "n_long")}
    grids: list[list[list[int]]] = []
    for volume, layer in layers:
        rows = np.flatnonzero((keys[:, 0] == volume) & (keys[:, 1] == layer))
        barrel = int(volume) in BARREL_VOLUMES
        radius = np.hypot(detector.center[rows, 0], detector.center[rows, 1])
        long = corners[rows, :, 2] if barrel else corner_r[rows]
        low, high = long.min() - margin, long.max() + margin
        position = radius.mean() if barrel else detector.center[rows, 2].mean()
        phi_half = np.abs(dphi[rows]).max(1) + margin / np.maximum(corner_r[rows].min(1), 1.0)
        long_lo, long_hi = long.min(1) - margin, long.max(1) + margin
        span = np.median(long.max(1) - long.min(1))
        n_long = max(1, int(round((high - low) / span * bins_per_module)))
        width = np.median(2 * np.abs(dphi[rows]).max(1))
        n_phi = max(1, int(round(2 * np.pi / width * bins_per_module)))
        cells: list[list[int]] = [[] for _ in range(n_phi * n_long)]
        phi_edges = 2 * np.pi / n_phi
        long_edges = (high - low) / n_long
        for k, row in enumerate(rows):
            p_lo = int(np.floor((center_phi[row] - phi_half[k] + np.pi) / phi_edges))
            p_hi = int(np.floor((center_phi[row] + phi_half[k] + np.pi) / phi_edges))
            l_lo = max(0, int(np.floor((long_lo[k] - low) / long_edges)))
            l_hi = min(n_long - 1, int(np.floor((long_hi[k] - low) / long_edges)))
            for ip in range(p_lo, p_hi + 1):
                for il in range(l_lo, l_hi + 1):
                    cells[(ip % n_phi) * n_long + il].append(int(row))
        grids.append(cells)
        for name, value in (("volume_id", volume), ("layer_id", layer), ("is_barrel", barrel),
                            ("position", position), ("low", low), ("high", high),
                            ("n_phi", n_phi), ("n_long", n_long)):
            fields[name].append(value)
    width = max(len(c) for cells in grids for c in cells)
    table = np.full((sum(len(c) for c in grids), width), -1, dtype=np.int64)
    offsets, start = [], 0
    for cells in grids:
        offsets.append(start)
        for i, members in enumerate(cells):
            table[start + i, : len(members)] = members
        start += len(cells)
    return LayerSurfaces(
        volume_id=np.array(fields["volume_id"], dtype=np.int64),
        layer_id=np.array(fields["layer_id"], dtype=np.int64),
        is_barrel=np.array(fields["is_barrel"], dtype=bool),
        position=np.array(fields["position"], dtype=np.float64),
        low=np.array(fields["low"], dtype=np.float64),
        high=np.array(fields["high"], dtype=np.float64),
        n_phi=np.array(fields["n_phi"], dtype=np.int64),
        n_long=np.array(fields["n_long"], dtype=np.int64),
        grid_offset=np.array(offsets, dtype=np.int64),
        candidates=table,
    )


@functools.lru_cache(maxsize=4)
def layer_surfaces_for(detector: Detector, margin: float = 12.0) -> LayerSurfaces:
    """Cached :func:`build_layer_surfaces` (one build per detector and margin)."""
    return build_layer_surfaces(detector, margin=margin)
