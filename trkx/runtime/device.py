"""The device inference runs on: ``auto``, ``cpu`` or ``cuda``.

    auto -> cuda when torch sees a CUDA device, else cpu

``trkx infer --device`` and ``TrainedPipeline.load(device=...)`` take one of these (or a
``torch.device``); asking for ``cuda`` where torch sees none is a user error naming the option,
never a silent fall-back to the CPU. fp32 tracks are byte-identical between CPU runs on any
machine; on a GPU the sums run in another order, so a few scores near a cut (and the tracks
through them) can differ from the CPU's (``benchmarks/gpu_inference.sh`` counts them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trkx.config import ConfigError

if TYPE_CHECKING:          # torch is imported by the functions: the CLI parser stays light
    import torch

DEVICES: tuple[str, ...] = ("auto", "cpu", "cuda")


def resolve_device(choice: str | torch.device = "auto", label: str = "device") -> torch.device:
    """The ``torch.device`` of ``choice`` (one of :data:`DEVICES` or a ``torch.device``); a
    ConfigError naming ``label`` when it is unknown or asks for CUDA that is not available."""
    import torch

    if isinstance(choice, torch.device):
        requested = choice
    elif choice == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    elif choice in DEVICES:
        requested = torch.device(choice)
    else:
        raise ConfigError(f"{label} {choice!r} is not one of {', '.join(DEVICES)}")
    if requested.type == "cuda" and not torch.cuda.is_available():
        why = ("this torch is a CPU build" if torch.version.cuda is None
               else "no CUDA device is visible")
        raise ConfigError(f"{label} cuda: CUDA is not available ({why}); use {label} cpu "
                          "or auto")
    if requested.type not in ("cpu", "cuda"):
        raise ConfigError(f"{label} {str(requested)!r} is not one of {', '.join(DEVICES)}")
    return requested


def device_label(device: torch.device) -> str:
    """What a run reports as its device: ``cpu`` or ``cuda:I``."""
    import torch

    if device.type != "cuda":
        return device.type
    return f"cuda:{device.index if device.index is not None else torch.cuda.current_device()}"


def gpu_name(device: torch.device) -> str | None:
    """The GPU's name (None on the CPU)."""
    import torch

    return torch.cuda.get_device_name(device) if device.type == "cuda" else None


def synchronize(device: torch.device) -> None:
    """Wait for the device's queued work (CUDA runs asynchronously), so that a clock read
    after it times the work itself; nothing on the CPU."""
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


#: Devices whose inference forwards (filter, GNN) run in cache-sized row blocks. On a CPU a
#: block keeps its hidden layers in cache (trkx.gnn.model.INFERENCE_BLOCK_ROWS has the
#: figures); on a GPU the blocks would be hundreds of small kernels per event (about 600
#: filter blocks and 7k launches on a pile-up-200 event), so there one forward takes all rows.
#: Tests empty it to run the GPU's unblocked path on the CPU.
ROW_BLOCKED_DEVICES: tuple[str, ...] = ("cpu",)


def row_blocked(tensor: torch.Tensor) -> bool:
    """Whether inference on ``tensor``'s device runs in row blocks (ROW_BLOCKED_DEVICES)."""
    return tensor.device.type in ROW_BLOCKED_DEVICES


def numba_importable() -> bool:
    """Whether numba can be imported (it is an optional dependency: the compiled CPU kernels
    fall back to numpy or torch without it)."""
    import importlib.util

    return importlib.util.find_spec("numba") is not None


def runs_compiled(tensor: torch.Tensor, devices: tuple[str, ...]) -> bool:
    """Whether work on ``tensor``'s device takes a compiled (numba) CPU kernel: the device is
    one of ``devices`` (a module's ``COMPILED_DEVICES``, which tests empty to run the GPU's
    torch path on the CPU) and numba is importable."""
    return tensor.device.type in devices and numba_importable()
