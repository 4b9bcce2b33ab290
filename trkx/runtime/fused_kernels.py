"""Compiled row kernels of the fused CPU inference path (trkx.runtime.fused_mlp).

Each kernel makes one pass over a block of rows ``z`` [R, C] (float32, C-contiguous) that a
matrix product has just written, and does in place what the plain modules do in several passes:

    norm_relu:         z_i <- relu(LN(z_i + b))
    gather_norm_relu:  z_i <- relu(LN(z_i + P[s_i, :C] + P[d_i, C:2C] + b))
    ... and then optionally, per row,
    residual:          E_i <- E_i + z_i             (the GNN's edge residual)
    dot:               y_i <- w . z_i + c           (a final Linear to one output)

with ``LN(v) = (v - mean(v)) / sqrt(var(v) + eps) * gamma + beta`` over the row (biased
variance, as torch's LayerNorm; two passes: the mean, then the squares of the deviations, which
keeps the variance exact where the mean is large against the spread). The sums are float32 and
fastmath is on: LLVM vectorises them and may reassociate, so a row's last bits follow the vector
width (AVX2 or AVX-512), as the BLAS's own products do; the result differs from torch's float32
LayerNorm by a float32 rounding (the tests bound it). The bias is added in the pass that sums the
row (a separate pass over a 64-wide row made the norm 2.8x slower: the loop no longer
vectorised). Rows are independent: numba's ``prange`` splits them between the threads.

Imported only on the CPU with numba importable (trkx.runtime.device.numba_importable).
"""

from __future__ import annotations

import math

import numba
import numpy as np
from numba.core import types
from numba.extending import intrinsic

pjit = numba.njit(cache=True, nogil=True, parallel=True, fastmath=True)


@numba.njit(cache=True, nogil=True, fastmath=True, inline="always")
def _normalise_row(z: np.ndarray, i: int, bias: np.ndarray, gamma: np.ndarray,
                   beta: np.ndarray, eps: float, relu: bool) -> None:
    """Row ``i`` of ``z`` <- [relu](LN(z_i + b)) in place (module docstring)."""
    columns = z.shape[1]
    total = np.float32(0.0)
    for j in range(columns):
        v = z[i, j] + bias[j]
        z[i, j] = v
        total += v
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
        _normalise_row(z, i, bias, gamma, beta, eps, relu)


@pjit
def norm_relu_residual(z: np.ndarray, bias: np.ndarray, gamma: np.ndarray, beta: np.ndarray,
                       eps: float, relu: bool, residual: np.ndarray) -> None:
    """:func:`norm_relu`, then ``residual_i += z_i``."""
    for i in numba.prange(z.shape[0]):
        _normalise_row(z, i, bias, gamma, beta, eps, relu)
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
        _normalise_row(z, i, bias, gamma, beta, eps, relu)
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
            z[i, j] = v
        _normalise_row(z, i, bias, gamma, beta, eps, relu)


# ---- bfloat16 (the ``bf16`` precision): products in bf16, norms in float32 ------------------
#
# A bf16 value is the upper 16 bits of a float32: read as ``bits << 16``, written rounded to
# nearest even, ``(bits + 0x7FFF + ((bits >> 16) & 1)) >> 16``. The kernels take the bf16
# tensors as int16 arrays (numba has no bf16 type); the float32 <-> uint32 reinterpretation is
# an LLVM bitcast (:func:`_as_float`, :func:`_as_bits`), so the loops stay vectorised.


def _bitcast(source: types.Type, target: types.Type):
    """A numba intrinsic: the ``target`` value with the bits of the ``source`` value."""

    @intrinsic
    def cast(typingctx, value):
        def codegen(context, builder, sig, args):
            return builder.bitcast(args[0], context.get_value_type(target))

        return target(source), codegen

    return cast


_as_float = _bitcast(types.uint32, types.float32)
_as_bits = _bitcast(types.float32, types.uint32)


@numba.njit(cache=True, nogil=True, fastmath=True, inline="always")
def _from_bf16(bits16) -> np.float32:
    return _as_float(np.uint32(np.uint16(bits16)) << np.uint32(16))


@numba.njit(cache=True, nogil=True, fastmath=True, inline="always")
def _to_bf16(value) -> np.int16:
    b = _as_bits(np.float32(value))
    return np.int16(np.uint16((b + np.uint32(0x7FFF) + ((b >> np.uint32(16)) & np.uint32(1)))
                              >> np.uint32(16)))


@numba.njit(cache=True, nogil=True, fastmath=True, inline="always")
def _normalise_bf16_row(z: np.ndarray, i: int, bias: np.ndarray, gamma: np.ndarray,
                        beta: np.ndarray, eps: float, relu: bool, row: np.ndarray) -> None:
    """``row <- [relu](LN(row + b))`` in float32, ``row`` holding row ``i`` of ``z`` first
    when ``z`` has rows (else ``row`` is already filled)."""
    columns = row.shape[0]
    if z.shape[0]:
        for j in range(columns):
            row[j] = _from_bf16(z[i, j])
    total = np.float32(0.0)
    for j in range(columns):
        row[j] += bias[j]
        total += row[j]
    mean = total / np.float32(columns)
    square = np.float32(0.0)
    for j in range(columns):
        d = row[j] - mean
        square += d * d
    inverse = np.float32(1.0) / np.float32(math.sqrt(square / np.float32(columns) + eps))
    for j in range(columns):
        v = (row[j] - mean) * inverse * gamma[j] + beta[j]
        if relu and v < 0:
            v = np.float32(0.0)
        row[j] = v


#: Rows per parallel task of the bf16 kernels (each task has one float32 row of scratch).
ROWS_PER_TASK = 256


@pjit
def norm_relu_bf16(z: np.ndarray, bias: np.ndarray, gamma: np.ndarray, beta: np.ndarray,
                   eps: float, relu: bool, out: np.ndarray, residual: np.ndarray,
                   mode: int, weight: np.ndarray, offset: float, head_out: np.ndarray) -> None:
    """``[relu](LN(z_i + b))`` of the bf16 rows ``z`` (int16 bits), in float32, written by
    ``mode``: 0 as bf16 into ``out`` (int16 bits; ``out`` may be ``z``), 1 as float32 into
    ``out`` and added into ``residual`` when it has rows, 2 folded by a final Linear to one
    output: ``head_out_i = weight . row + offset`` (float32)."""
    rows, columns = z.shape
    tasks = (rows + ROWS_PER_TASK - 1) // ROWS_PER_TASK
    for task in numba.prange(tasks):
        row = np.empty(columns, np.float32)
        for i in range(task * ROWS_PER_TASK, min(rows, (task + 1) * ROWS_PER_TASK)):
            _normalise_bf16_row(z, i, bias, gamma, beta, eps, relu, row)
            if mode == 0:
                for j in range(columns):
                    out[i, j] = _to_bf16(row[j])
            elif mode == 1:
                for j in range(columns):
                    out[i, j] = row[j]
                if residual.shape[0]:
                    for j in range(columns):
                        residual[i, j] += row[j]
            else:
                acc = np.float32(0.0)
                for j in range(columns):
                    acc += weight[j] * row[j]
                head_out[i] = acc + np.float32(offset)


@pjit
def gather_norm_relu_bf16(z: np.ndarray, projected: np.ndarray, src: np.ndarray,
                          dst: np.ndarray, has_z: bool, bias: np.ndarray, gamma: np.ndarray,
                          beta: np.ndarray, eps: float, relu: bool, out: np.ndarray) -> None:
    """:func:`gather_norm_relu` with ``z`` bf16 (int16 bits; its rows ignored without
    ``has_z``), ``projected`` float32, the result written as bf16 into ``out``."""
    rows, columns = out.shape
    tasks = (rows + ROWS_PER_TASK - 1) // ROWS_PER_TASK
    no_rows = z[:0]
    for task in numba.prange(tasks):
        row = np.empty(columns, np.float32)
        for i in range(task * ROWS_PER_TASK, min(rows, (task + 1) * ROWS_PER_TASK)):
            a = src[i]
            b = dst[i]
            for j in range(columns):
                v = projected[a, j] + projected[b, columns + j]
                if has_z:
                    v += _from_bf16(z[i, j])
                row[j] = v
            _normalise_bf16_row(no_rows, i, bias, gamma, beta, eps, relu, row)
            for j in range(columns):
                out[i, j] = _to_bf16(row[j])
