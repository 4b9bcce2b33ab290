"""Compiled row kernels of the fused CPU inference path (trkx.runtime.fused_mlp).

Each kernel makes one pass over a block of rows ``z`` [R, C] (float32, C-contiguous) that a
matrix product has just written, and does in place what the plain modules do in several passes:

    norm_relu:         z_i <- relu(LN(z_i + b))
    gather_norm_relu:  z_i <- relu(LN(z_i + P[s_i, :C] + P[d_i, C:2C] + b))
    ... and then optionally, per row,
    residual:          E_i <- E_i + z_i             (the GNN's edge residual)
    dot:               y_i <- w . z_i + c           (a final Linear to one output)

with ``LN(v) = (v - mean(v)) / sqrt(var(v) + eps) * gamma + beta`` over the row (biased
variance, as torch's LayerNorm). The mean and the variance are sums in float64 in column order,
and fastmath is off (no reassociation, no fused multiply-adds), so a row's result depends on no
instruction set and differs from torch's float32 LayerNorm by a float32 rounding (the tests bound
it). Rows are independent: numba's ``prange`` splits them between the threads.

Imported only on the CPU with numba importable (trkx.runtime.device.numba_importable).
"""

from __future__ import annotations

import math

import numba
import numpy as np

pjit = numba.njit(cache=True, nogil=True, parallel=True, fastmath=True)


@numba.njit(cache=True, nogil=True, fastmath=True, inline="always")
def _normalise_row(z: np.ndarray, i: int, gamma: np.ndarray, beta: np.ndarray, eps: float,
                   relu: bool) -> None:
    """Row ``i`` of ``z`` <- [relu](LN(z_i)) in place (module docstring)."""
    columns = z.shape[1]
    total = np.float32(0.0)
    for j in range(columns):
        total += z[i, j]
    mean = total / np.float32(columns)
    square = np.float32(0.0)
    for j in range(columns):
        d = z[i, j] - mean
        square += d * d
    inverse = np.float32(1.0) / np.float32(math.sqrt(square / np.float32(columns) + eps))
    for j in range(columns):
        v = (z[i, j] - mean) * inverse * gamma[j] + beta[j]
        if relu and v < 0:
            v = np.float32(0.0)
        z[i, j] = v


@pjit
def norm_relu(z: np.ndarray, bias: np.ndarray, gamma: np.ndarray, beta: np.ndarray,
              eps: float, relu: bool) -> None:
    """``z_i <- [relu](LN(z_i + b))`` for every row, in place."""
    for i in numba.prange(z.shape[0]):
        for j in range(z.shape[1]):
            z[i, j] += bias[j]
        _normalise_row(z, i, gamma, beta, eps, relu)


@pjit
def norm_relu_residual(z: np.ndarray, bias: np.ndarray, gamma: np.ndarray, beta: np.ndarray,
                       eps: float, relu: bool, residual: np.ndarray) -> None:
    """:func:`norm_relu`, then ``residual_i += z_i``."""
    for i in numba.prange(z.shape[0]):
        for j in range(z.shape[1]):
            z[i, j] += bias[j]
        _normalise_row(z, i, gamma, beta, eps, relu)
        for j in range(z.shape[1]):
            residual[i, j] += z[i, j]


@pjit
def norm_relu_dot(z: np.ndarray, bias: np.ndarray, gamma: np.ndarray, beta: np.ndarray,
                  eps: float, relu: bool, weight: np.ndarray, offset: float,
                  out: np.ndarray) -> None:
    """:func:`norm_relu`, then ``out_i = weight . z_i + offset`` (a Linear to one output; the
    products summed in column order in float32, as a row of a matrix product would be up to
    its blocking)."""
    for i in numba.prange(z.shape[0]):
        for j in range(z.shape[1]):
            z[i, j] += bias[j]
        _normalise_row(z, i, gamma, beta, eps, relu)
        acc = np.float32(0.0)
        for j in range(z.shape[1]):
            acc += weight[j] * z[i, j]
        out[i] = acc + np.float32(offset)


@pjit
def gather_norm_relu(z: np.ndarray, projected: np.ndarray, src: np.ndarray, dst: np.ndarray,
                     has_z: bool, bias: np.ndarray, gamma: np.ndarray, beta: np.ndarray,
                     eps: float, relu: bool) -> None:
    """``z_i <- [relu](LN([z_i +] P[s_i, :C] + P[d_i, C:] + b))``: the first layer of an edge
    MLP whose source and destination blocks were applied on the nodes (``projected`` [N, 2C]);
    without ``has_z`` the row's old values are ignored (an MLP with no edge block)."""
    columns = z.shape[1]
    for i in numba.prange(z.shape[0]):
        a = src[i]
        b = dst[i]
        for j in range(columns):
            v = projected[a, j] + projected[b, columns + j]
            if has_z:
                v += z[i, j]
            z[i, j] = v + bias[j]
        _normalise_row(z, i, gamma, beta, eps, relu)
