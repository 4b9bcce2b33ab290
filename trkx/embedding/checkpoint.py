"""Stage checkpoints as plain tensors + hyperparameters (loadable with weights_only=True)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

from trkx.atomic import load_tensors, save_tensors


def save_checkpoint(path: str | os.PathLike, stage: str, hparams: dict[str, Any],
                    state_dict: dict[str, torch.Tensor], extra: dict[str, Any] | None = None,
                    ) -> Path:
    """Atomically write ``{stage, hparams, state_dict, extra}``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {"stage": stage, "hparams": dict(hparams),
               "state_dict": {k: v.detach().cpu() for k, v in state_dict.items()},
               "extra": dict(extra or {})}
    return save_tensors(payload, path)


def load_checkpoint(path: str | os.PathLike, stage: str) -> dict[str, Any]:
    payload = load_tensors(path, "trkx checkpoint")
    if payload.get("stage") != stage:
        found = payload.get("stage") if isinstance(payload, dict) else None
        raise ValueError(f"{path}: not a {stage} checkpoint (stage {found!r})")
    return payload
