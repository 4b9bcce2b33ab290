"""The floating-point precision of the dense layers at inference: ``fp32`` or ``bf16``.

Under ``bf16`` every Linear of a learned stage runs in bfloat16 autocast (8 mantissa bits;
inputs and weights rounded, products accumulated in float32); graph sums, scores and cuts stay
float32. It pays only where the hardware multiplies bfloat16 natively (AVX512-BF16 / AMX CPUs,
CUDA GPUs of compute capability >= 8): an AVX2-only CPU emulates it and runs slower than fp32
(measured on the 2-core AVX2 build machine: a 3-layer width-128 MLP over 1M rows took ~4x
longer under bf16 autocast).

The precision is a setting, never a guess: ``fp32`` (the default) gives the same tracks on
every machine; ``bf16`` is opted into explicitly and changes the scores (and so, near the
cuts, the tracks). There is no automatic choice: a choice made by timing the host CPU made
the same checkpoints give different tracks on different machines.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

PRECISIONS: tuple[str, ...] = ("fp32", "bf16")


def check_precision(precision: str) -> str:
    """``precision`` when it is one of :data:`PRECISIONS`, else a ValueError naming it."""
    if precision == "auto":
        raise ValueError("precision 'auto' was removed in trkx 0.2.0 (it timed the host CPU, "
                         "so tracks depended on the machine): use fp32 or bf16")
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, not {precision!r}")
    return precision


@contextlib.contextmanager
def dense_precision(precision: str, device: torch.device | str = "cpu") -> Iterator[None]:
    """Autocast context of ``precision`` on ``device`` (``fp32``: no autocast)."""
    check_precision(precision)
    if precision == "bf16":
        with torch.autocast(torch.device(device).type, dtype=torch.bfloat16):
            yield
    else:
        yield
