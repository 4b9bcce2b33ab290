"""Helpers of benchmarks/inference.py: the machine's matmul rates and each stage's FLOP count.

FLOPs count 2 per multiply-add of the dense layers as the stages compute them:

    embedding:  N * sum_l 2 in_l out_l                        (every hit once)
    filter:     E_graph * sum_l 2 in_l out_l                  (every candidate edge once)
    gnn:        E_filter * f_edge + N * f_node   (InteractionGNN.flops_per_edge_and_node)

Rates are measured at the thread count in force: a square fp32 GEMM (2048^3), a tall-skinny
layer ([65536, 128] x [128, 128], the shape of the stages' hidden layers) and a bf16 GEMM.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch
from torch import nn


def best_seconds(fn: Callable[[], object], repeats: int = 3) -> float:
    """Best wall time of ``repeats`` calls after one warm-up call."""
    fn()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


@torch.inference_mode()
def matmul_rates() -> dict[str, float]:
    """FLOP/s of a square fp32 GEMM, a tall-skinny fp32 layer and a square bf16 GEMM."""
    generator = torch.Generator().manual_seed(0)
    a = torch.randn(2048, 2048, generator=generator)
    b = torch.randn(2048, 2048, generator=generator)
    tall = torch.randn(65536, 128, generator=generator)
    weight = torch.randn(128, 128, generator=generator)
    a16, b16 = a.bfloat16(), b.bfloat16()
    return {"gemm_fp32": 2 * 2048**3 / best_seconds(lambda: a @ b),
            "tall_skinny_fp32": 2 * 65536 * 128 * 128 / best_seconds(lambda: tall @ weight),
            "gemm_bf16": 2 * 2048**3 / best_seconds(lambda: a16 @ b16, repeats=1)}


def dense_flops(module: nn.Module) -> int:
    """FLOPs of one row through every Linear of ``module`` (2 per multiply-add)."""
    return sum(2 * m.in_features * m.out_features for m in module.modules()
               if isinstance(m, nn.Linear))


def stage_flops(pipeline, n_hits: int, graph_edges: int, filter_edges: int) -> dict[str, int]:
    """Dense FLOPs of each learned stage on one event (module docstring)."""
    per_edge, per_node = pipeline.gnn.flops_per_edge_and_node()
    return {"embedding": n_hits * dense_flops(pipeline.embedding),
            "filter": graph_edges * dense_flops(pipeline.filter),
            "gnn": filter_edges * per_edge + n_hits * per_node}


def median(values: list[float]) -> float:
    return float(statistics.median(values)) if values else float("nan")
