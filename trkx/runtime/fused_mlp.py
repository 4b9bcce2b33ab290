"""Fused CPU inference of the trkx MLPs: a matrix product, then one compiled pass per layer.

The learned stages' MLPs are chains of ``Linear -> LayerNorm -> ReLU`` (trkx.gnn.model.make_mlp,
trkx.filter.model.FilterMLP), run over millions of edge rows. The plain modules make a pass over
memory for every step of a layer: the bias copied into the output, the product, the norm into a
new tensor, the activation, the copy into the result; an edge MLP's first layer adds two gathers
and two sums. Here each layer of a row block is

    Z = X W^T                         (torch.mm into a reused buffer: the BLAS)
    Z <- relu(LN(Z + b))              (one compiled pass: trkx.runtime.fused_kernels)

with the edge MLP's node-side gathers, the GNN's edge residual and a final Linear to one output
folded into those passes. The result equals the plain modules' to float32 rounding (the norm's
sums run in another order), not bit for bit; ``fused: false`` in the pipeline's ``inference``
section (``trkx infer --set inference.fused=false``) runs the plain modules instead.

Under the ``bf16`` precision (trkx.runtime.precision) the products run in bfloat16 (the BLAS's
native kernels where the CPU has them: AVX512-BF16, AMX) and the rows between them are bf16;
each pass reads and normalises them in float32 and writes them back as bf16, the last layer as
float32. The plain modules under autocast instead convert every Linear's input and keep float32
rows between the layers, so the two agree to bf16 rounding.

:class:`MLPPlan` reads a ``nn.Sequential``; :func:`plan` returns None for a chain it cannot fuse
(another activation, no LayerNorm), and the callers then run the module itself.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn

from trkx.runtime.device import numba_importable


@dataclass(frozen=True)
class FusedLayer:
    """One ``Linear -> LayerNorm -> ReLU`` of a chain: ``weight_t`` [in, out] (a view of the
    Linear's weight, in the product's dtype), the bias and the norm's parameters as numpy
    views, and whether the ReLU follows."""

    weight_t: Tensor
    bias: np.ndarray
    gamma: np.ndarray
    beta: np.ndarray
    eps: float
    relu: bool


@dataclass(frozen=True)
class MLPPlan:
    """The layers of a chain, and its last ``Linear(c, 1)`` when it ends in one (folded into the
    previous layer's pass as a dot product)."""

    layers: tuple[FusedLayer, ...]
    head: tuple[np.ndarray, float] | None

    @property
    def bf16(self) -> bool:
        """Whether the products run in bfloat16 (the ``bf16`` precision)."""
        return self.layers[0].weight_t.dtype == torch.bfloat16

    @property
    def width(self) -> int:
        """Output width of the last fused layer."""
        return int(self.layers[-1].weight_t.shape[1])


def _numpy(t: Tensor) -> np.ndarray:
    return t.detach().numpy()


def plan(net: nn.Sequential, precision: str | None = "fp32") -> MLPPlan | None:
    """The fused plan of ``net`` (module docstring) for products in ``precision`` (``fp32``,
    ``bf16``: the weights as bfloat16; None: no plan), or None when ``net`` is not a chain of
    ``Linear -> LayerNorm -> ReLU`` layers (optionally ending in a bare Linear to one output)
    on the CPU in float32, or numba is missing."""
    if precision is None:
        return None
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    modules = list(net)
    if not modules or not numba_importable():
        return None
    layers: list[FusedLayer] = []
    head = None
    i = 0
    while i < len(modules):
        linear = modules[i]
        if not isinstance(linear, nn.Linear) or linear.bias is None \
                or linear.weight.dtype != torch.float32 or linear.weight.device.type != "cpu":
            return None
        rest = modules[i + 1:i + 3]
        if len(rest) == 2 and isinstance(rest[0], nn.LayerNorm) and isinstance(rest[1], nn.ReLU) \
                and rest[0].elementwise_affine and rest[0].bias is not None \
                and tuple(rest[0].normalized_shape) == (linear.out_features,):
            layers.append(FusedLayer(linear.weight.detach().t().to(dtype), _numpy(linear.bias),
                                     _numpy(rest[0].weight), _numpy(rest[0].bias),
                                     float(rest[0].eps), True))
            i += 3
        elif i == len(modules) - 1 and linear.out_features == 1 and layers:
            head = (_numpy(linear.weight)[0], float(linear.bias.detach()[0]))
            i += 1
        else:
            return None
    return MLPPlan(tuple(layers), head)


class Buffers:
    """Two reusable [rows, width] buffers per width and dtype: the layers of a block alternate
    between them, so a forward allocates nothing per block."""

    def __init__(self, rows: int) -> None:
        self.rows = rows
        self._pairs: dict[tuple[int, torch.dtype], list[Tensor]] = {}

    def get(self, width: int, rows: int, avoid: Tensor | None = None,
            dtype: torch.dtype = torch.float32) -> Tensor:
        """A [rows, width] buffer that is not ``avoid`` (the layer's input)."""
        pair = self._pairs.get((width, dtype))
        if pair is None:                     # made once per width and dtype
            pair = self._pairs[width, dtype] = [
                torch.empty(self.rows, width, dtype=dtype, device="cpu") for _ in range(2)]
        first = pair[0][:rows]
        if avoid is not None and first.data_ptr() == avoid.data_ptr():
            return pair[1][:rows]
        return first


def run_layers(layers: tuple[FusedLayer, ...], z: Tensor, buffers: Buffers,
               out: Tensor | None = None, residual: Tensor | None = None,
               head: tuple[np.ndarray, float] | None = None,
               head_out: Tensor | None = None) -> Tensor:
    """``layers`` applied to the row block ``z`` (the first product reads ``z``, which is not
    written). The last layer writes into ``out`` when given (a [rows, width] slice of the
    result), adds itself into ``residual`` when given, and with ``head`` writes the head's one
    output per row into ``head_out`` [rows]. Returns the last layer's rows."""
    from trkx.runtime import fused_kernels as k

    if layers and layers[0].weight_t.dtype == torch.bfloat16:
        return _run_layers_bf16(layers, z, buffers, out, residual, head, head_out)
    rows = z.shape[0]
    for index, layer in enumerate(layers):
        last = index == len(layers) - 1
        width = layer.weight_t.shape[1]
        target = out if (last and out is not None) else buffers.get(width, rows, avoid=z)
        torch.mm(z, layer.weight_t, out=target)
        values = target.numpy()
        if last and head is not None:
            k.norm_relu_dot(values, layer.bias, layer.gamma, layer.beta, layer.eps, layer.relu,
                            head[0], head[1], head_out.numpy())
        elif last and residual is not None:
            k.norm_relu_residual(values, layer.bias, layer.gamma, layer.beta, layer.eps,
                                 layer.relu, residual.numpy())
        else:
            k.norm_relu(values, layer.bias, layer.gamma, layer.beta, layer.eps, layer.relu)
        z = target
    return z


def bits(t: Tensor) -> np.ndarray:
    """A bfloat16 tensor's memory as an int16 array (the kernels' view of it)."""
    return t.view(torch.int16).numpy()


_NO_ROWS = np.zeros((0, 1), np.float32)
_NO_VALUES = np.zeros(0, np.float32)


def _run_layers_bf16(layers: tuple[FusedLayer, ...], z: Tensor, buffers: Buffers,
                     out: Tensor | None, residual: Tensor | None,
                     head: tuple[np.ndarray, float] | None,
                     head_out: Tensor | None) -> Tensor:
    """:func:`run_layers` with the products in bfloat16 (``z`` is rounded to it when float32):
    each layer's rows stay bf16 between the products and the last is written in float32 into
    ``out`` (a new tensor when not given), ``residual`` or ``head_out``."""
    from trkx.runtime.fused_kernels import norm_relu_bf16

    rows = z.shape[0]
    if z.dtype != torch.bfloat16:
        z = z.to(torch.bfloat16)
    for index, layer in enumerate(layers):
        last = index == len(layers) - 1
        width = layer.weight_t.shape[1]
        target = buffers.get(width, rows, avoid=z, dtype=torch.bfloat16)
        torch.mm(z, layer.weight_t, out=target)
        common = (bits(target), layer.bias, layer.gamma, layer.beta, layer.eps, layer.relu)
        if not last:
            norm_relu_bf16(*common, bits(target), _NO_ROWS, 0, _NO_VALUES, 0.0, _NO_VALUES)
        elif head is not None:
            norm_relu_bf16(*common, _NO_ROWS, _NO_ROWS, 2, head[0], head[1], head_out.numpy())
        else:
            out = torch.empty(rows, width, device="cpu") if out is None else out
            norm_relu_bf16(*common, out.numpy(),
                           _NO_ROWS if residual is None else residual.numpy(), 1, _NO_VALUES,
                           0.0, _NO_VALUES)
            return out
        z = target
    return z


_ENABLED = True


def fused_precision() -> str | None:
    """The precision of the fused products (:func:`fused_inference`): ``fp32``, ``bf16`` under
    bfloat16 autocast (the ``bf16`` precision, trkx.runtime.precision), None when the plain
    modules run (switched off, or another autocast)."""
    if not _ENABLED:
        return None
    if torch.is_autocast_enabled("cpu"):
        return "bf16" if torch.get_autocast_dtype("cpu") == torch.bfloat16 else None
    return "fp32"


class fused_inference:  # a context manager, named as one
    """``with fused_inference(False):`` runs the plain modules (the reference path) inside."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = bool(enabled)
        self._previous = True

    def __enter__(self) -> None:
        global _ENABLED
        self._previous, _ENABLED = _ENABLED, self.enabled

    def __exit__(self, *exc: object) -> None:
        global _ENABLED
        _ENABLED = self._previous
