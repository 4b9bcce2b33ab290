"""The floating-point precision of the dense layers at inference: ``fp32``, ``bf16`` or ``auto``.

Under ``bf16`` every Linear of a learned stage runs in bfloat16 autocast (8 mantissa bits;
inputs and weights rounded, products accumulated in float32); graph sums, scores and cuts stay
float32. It pays only where the hardware multiplies bfloat16 natively (AVX512-BF16 / AMX CPUs,
CUDA GPUs of compute capability >= 8): an AVX2-only CPU emulates it and runs slower than fp32
(measured on the 2-core AVX2 build machine: a 3-layer width-128 MLP over 1M rows took ~4x
longer under bf16 autocast). Hence ``auto``:

    auto -> bf16  if  t_bf16(layer) < 0.8 t_fp32(layer)  else  fp32,

timed once per process, device and width on a ``Linear(h, h) -> LayerNorm -> ReLU`` block of
4096 rows (the shape of the stages' hidden layers); the 0.8 margin keeps fp32 (exact physics)
unless bf16 is clearly faster. The inference benchmark checks that the chosen precision keeps
the tracking efficiency (benchmarks/inference.py, ``efficiency_delta``).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

import torch
from torch import nn

PRECISIONS: tuple[str, ...] = ("fp32", "bf16", "auto")
BF16_MARGIN = 0.8

_decisions: dict[tuple[str, int], str] = {}


def check_precision(precision: str) -> str:
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, not {precision!r}")
    return precision


def _time_block(block: nn.Module, x: torch.Tensor, repeats: int = 3) -> float:
    synchronize = torch.cuda.synchronize if x.is_cuda else (lambda: None)
    best = float("inf")
    for _ in range(repeats + 1):            # the first round warms caches and kernels up
        synchronize()
        start = time.perf_counter()
        block(x)
        synchronize()
        best = min(best, time.perf_counter() - start)
    return best


@torch.inference_mode()
def bf16_is_faster(device: torch.device | str = "cpu", width: int = 128,
                   rows: int = 4096) -> bool:
    """Whether a hidden-layer block runs clearly faster under bf16 autocast than in fp32."""
    device = torch.device(device)
    generator = torch.Generator().manual_seed(0)
    block = nn.Sequential(nn.Linear(width, width), nn.LayerNorm(width), nn.ReLU()).to(device)
    x = torch.randn(rows, width, generator=generator).to(device)
    fp32 = _time_block(block, x)
    with torch.autocast(device.type, dtype=torch.bfloat16):
        bf16 = _time_block(block, x)
    return bf16 < BF16_MARGIN * fp32


def resolve_precision(precision: str, device: torch.device | str = "cpu",
                      width: int = 128) -> str:
    """``fp32`` or ``bf16``: ``auto`` decided by :func:`bf16_is_faster` once per
    (device type, width) in this process."""
    check_precision(precision)
    if precision != "auto":
        return precision
    key = (torch.device(device).type, int(width))
    if key not in _decisions:
        _decisions[key] = "bf16" if bf16_is_faster(device, width) else "fp32"
    return _decisions[key]


def decisions() -> dict[str, str]:
    """The ``auto`` choices made so far in this process, ``{"cpu:128": "fp32", ...}``."""
    return {f"{device}:{width}": choice for (device, width), choice in _decisions.items()}


@contextlib.contextmanager
def dense_precision(precision: str, device: torch.device | str = "cpu") -> Iterator[None]:
    """Autocast context of a resolved precision (``fp32``: no autocast)."""
    if precision == "bf16":
        with torch.autocast(torch.device(device).type, dtype=torch.bfloat16):
            yield
    elif precision == "fp32":
        yield
    else:
        raise ValueError(f"resolve the precision first (fp32 or bf16), got {precision!r}")
