"""Build the local GraphOps for one graph: ``"csr"``, ``"scatter"`` or ``"auto"``.

``"auto"`` times one forward+backward of ``gather`` and ``aggregate`` with both kernels, at the
model's width, the first time it meets a graph of a new *size class* (``N`` and ``E`` rounded
to the nearest power of two), and remembers the faster kernel for every later graph of that
class. The choice is therefore measured once per size class per process, not per event.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import torch
from torch import Tensor

from trkx.gnn.graph_ops import GraphOps
from trkx.gnn.local_ops import CsrGraphOps, ScatterGraphOps

KERNELS: dict[str, Callable[[Tensor, int], GraphOps]] = {
    "csr": CsrGraphOps,
    "scatter": ScatterGraphOps,
}
GRAPH_OPS_CHOICES: tuple[str, ...] = (*KERNELS, "auto")


def size_class(num_nodes: int, num_edges: int, width: int) -> tuple[int, int, int]:
    """``(round(log2 N), round(log2 E), width)``: graphs in one class share a kernel choice."""
    return (round(math.log2(max(num_nodes, 1))), round(math.log2(max(num_edges, 1))), width)


def time_graph_ops(ops: GraphOps, width: int, repeats: int = 2,
                   dtype: torch.dtype = torch.float32,
                   device: torch.device | str = "cpu", backward: bool = True) -> float:
    """Best-of-``repeats`` seconds for one forward (+backward when ``backward``: training)
    of ``gather`` then ``aggregate`` on ``device`` (the first, untimed round warms caches:
    CSR build, allocator)."""
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(ops.num_nodes, width, generator=generator, dtype=dtype).to(device)
    x.requires_grad_(backward)
    synchronize = torch.cuda.synchronize if x.is_cuda else (lambda: None)
    best = math.inf
    for _ in range(repeats + 1):
        synchronize()
        start = time.perf_counter()
        x_src, x_dst = ops.gather(x)
        m_in, m_out = ops.aggregate(x_src + x_dst)
        if backward:
            (m_in + m_out).sum().backward()
        synchronize()
        best = min(best, time.perf_counter() - start)
        x.grad = None
    return best


def time_kernels(edge_index: Tensor, num_nodes: int, width: int,
                 repeats: int = 2, backward: bool = True) -> dict[str, float]:
    """:func:`time_graph_ops` of every local kernel on this graph.

    Gradients are enabled here even when called under ``no_grad``/``inference_mode`` (e.g. on
    the first graph of Lightning's validation sanity check); the graph is copied out of
    inference mode so that the timed operators may save it for backward."""
    with torch.inference_mode(False), torch.enable_grad():
        edge_index = edge_index.clone()
        return {name: time_graph_ops(make(edge_index, num_nodes), width, repeats,
                                     device=edge_index.device, backward=backward)
                for name, make in KERNELS.items()}


class KernelChooser:
    """Remembers, per size class, which kernel measured fastest.

    Args:
        width: feature width used for the timing (the model's hidden width).
        repeats: timed repetitions per kernel (best one counts).
        backward: time forward+backward (training); False times the forward only
            (inference, where the backward never runs).
    """

    def __init__(self, width: int = 128, repeats: int = 2, backward: bool = True) -> None:
        self.width = width
        self.repeats = repeats
        self.backward = backward
        self.choices: dict[tuple[int, int, int], str] = {}
        self.timings: dict[tuple[int, int, int], dict[str, float]] = {}

    def build(self, edge_index: Tensor, num_nodes: int) -> GraphOps:
        """The faster kernel's GraphOps for this graph (timing both on a new size class)."""
        key = size_class(num_nodes, edge_index.shape[1], self.width)
        if key in self.choices:
            return KERNELS[self.choices[key]](edge_index, num_nodes)
        timings = time_kernels(edge_index, num_nodes, self.width, self.repeats, self.backward)
        best = min(timings, key=timings.__getitem__)
        self.choices[key] = best
        self.timings[key] = timings
        return KERNELS[best](edge_index, num_nodes)


def build_graph_ops(edge_index: Tensor, num_nodes: int, kind: str = "csr",
                    chooser: KernelChooser | None = None) -> GraphOps:
    """The local GraphOps of one graph.

    Args:
        edge_index: [2, E] directed edges ``s -> d``.
        num_nodes: N.
        kind: ``"csr"`` (CSR SpMM), ``"scatter"`` (index scatter) or ``"auto"``.
        chooser: the :class:`KernelChooser` that remembers ``"auto"`` decisions (one per
            training run or inference job; a fresh one is made when omitted).
    """
    if kind == "auto":
        return (chooser or KernelChooser()).build(edge_index, num_nodes)
    if kind not in KERNELS:
        raise ValueError(f"graph_ops {kind!r} is not one of {', '.join(GRAPH_OPS_CHOICES)}")
    return KERNELS[kind](edge_index, num_nodes)
