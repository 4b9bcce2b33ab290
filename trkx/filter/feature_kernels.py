"""The filter's edge features in one compiled pass over the edges (CPU; the math:
trkx.filter.features and trkx.edges.geometry).

For edge e = i -> j the kernel reads two rows of a hit-major table (the hit features, then r,
phi, z, eta and, with cells, x = r cos phi, y = r sin phi and the unscaled cluster directions)
(float64) and writes row e of the [E, F] float32 output:

    [x_i, x_j, dr, dphi, dz, deta (, a_eta(i), a_phi(i), a_eta(j), a_phi(j))
     (, z0, phislope, rphislope)]

The torch expression of the same rows (trkx.filter.features.torch_rows, the GPU's path)
makes each column a separate pass: gathers of single rows, a temporary per operation and a
final copy of all F rows; here every value is read and written once. The arithmetic is
float64 (the table holds the float32 inputs exactly), rounded once to float32: the values
agree with the torch rows evaluated in float64 to a float32 rounding (the float32 rows lose up
to 3e-4 to cancellation in the agreement and slope columns). fastmath is off (no fused
multiply-adds, no reordering). With cells, each edge's own direction (eta_e, phi_e) is the one
transcendental step: :func:`edge_slopes` writes its arguments, torch's vectorised ``asinh`` and
``atan2`` evaluate them for all edges of a chunk, and :func:`fill_edge_features` reads them (a
C-library call per edge inside the kernel took 1.05 s of its 1.1 s on event 21001, 5.9M
edges, 2 threads; now 0.18 s in all). Those two functions' CPU variants may differ in the last
double bit, which survives the float32 rounding for about one value in 10^8.

Imported only when the features are computed on the CPU with numba importable.
"""

from __future__ import annotations

import math

import numba
import numpy as np

njit = numba.njit(cache=True, nogil=True, fastmath=False)
pjit = numba.njit(cache=True, nogil=True, parallel=True, fastmath=False)

#: Columns of the hit table after the hit features: r, phi, z, eta, then with cells x, y,
#: dir_eta, dir_phi (unscaled: radians of eta and phi).
POSITION_COLUMNS = 4
CELL_COLUMNS = 4


@njit
def wrap(angle: float) -> float:
    """``angle`` mapped into [-pi, pi) (trkx.edges.geometry.wrap_angle)."""
    shifted = angle + math.pi
    return shifted - 2.0 * math.pi * math.floor(shifted / (2.0 * math.pi)) - math.pi


@pjit
def fill_edge_features(table: np.ndarray, src: np.ndarray, dst: np.ndarray,
                       hit_features: int, cells: bool, trajectory: bool,
                       scale_r: float, scale_z: float, scale_dir_eta: float,
                       min_step: float, z0_clip: float, slope_clip: float,
                       direction: np.ndarray, out: np.ndarray) -> None:
    """Row e of ``out`` [E, F] float32 for each edge ``src[e] -> dst[e]`` of the hit
    ``table`` [N, hit_features + 4 (+ 4 with cells)] float64 (module docstring); with
    ``cells``, ``direction`` [E, 2] holds each edge's (eta_e, phi_e) (:func:`edge_slopes`)."""
    h = hit_features
    for e in numba.prange(src.shape[0]):
        i, j = src[e], dst[e]
        for c in range(h):
            out[e, c] = table[i, c]
            out[e, h + c] = table[j, c]
        r_i, phi_i, z_i, eta_i = table[i, h], table[i, h + 1], table[i, h + 2], table[i, h + 3]
        r_j, phi_j, z_j, eta_j = table[j, h], table[j, h + 1], table[j, h + 2], table[j, h + 3]
        row = 2 * h
        dphi = wrap(phi_j - phi_i)
        out[e, row] = (r_j - r_i) / scale_r
        out[e, row + 1] = dphi / math.pi
        out[e, row + 2] = (z_j - z_i) / scale_z
        out[e, row + 3] = eta_j - eta_i
        row += 4
        if cells:
            edge_eta, edge_phi = direction[e, 0], direction[e, 1]
            for hit in (i, j):
                out[e, row] = (table[hit, h + 6] - edge_eta) / scale_dir_eta
                out[e, row + 1] = wrap(table[hit, h + 7] - edge_phi) / math.pi
                row += 2
        if trajectory:
            step = r_j - r_i
            step = -max(-step, min_step) if step < 0 else max(step, min_step)
            z0 = ((z_i + z_j) / 2.0 - (r_i + r_j) / 2.0 * (z_j - z_i) / step) / scale_z
            phislope = dphi / (step / 1000.0)
            rphislope = (r_i + r_j) / 2000.0 * phislope
            out[e, row] = min(max(z0, -z0_clip), z0_clip)
            out[e, row + 1] = min(max(phislope, -slope_clip), slope_clip)
            out[e, row + 2] = min(max(rphislope, -slope_clip), slope_clip)


@pjit
def edge_slopes(table: np.ndarray, src: np.ndarray, dst: np.ndarray, hit_features: int,
                out: np.ndarray) -> None:
    """Row e of ``out`` [E, 3] float64 for each edge: ``(dz / max(|dxy|, 1e-6), dy, dx)``, the
    arguments of the edge's own direction eta_e = asinh(column 0), phi_e = atan2(dy, dx),
    which torch then evaluates over all edges at once (its vectorised asinh and atan2: a
    call of the C library's per edge here cost 1.05 s of 1.1 s on event 21001)."""
    h = hit_features
    for e in numba.prange(src.shape[0]):
        i, j = src[e], dst[e]
        dx = table[j, h + 4] - table[i, h + 4]
        dy = table[j, h + 5] - table[i, h + 5]
        out[e, 0] = (table[j, h + 2] - table[i, h + 2]) / max(math.sqrt(dx * dx + dy * dy), 1e-6)
        out[e, 1] = dy
        out[e, 2] = dx
