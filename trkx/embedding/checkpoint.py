"""Stage checkpoints as plain tensors + hyperparameters (loadable with weights_only=True)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import torch


def save_checkpoint(path: str | os.PathLike, stage: str, hparams: dict[str, Any],
                    state_dict: dict[str, torch.Tensor], extra: dict[str, Any] | None = None,
                    ) -> Path:
    """Atomically write ``{stage, hparams, state_dict, extra}``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {"stage": stage, "hparams": dict(hparams),
               "state_dict": {k: v.detach().cpu() for k, v in state_dict.items()},
               "extra": dict(extra or {})}
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        torch.save(payload, tmp)
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)
    return path


def load_checkpoint(path: str | os.PathLike, stage: str) -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such checkpoint")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # corrupt or unsafe file
        raise ValueError(f"{path}: not a readable trkx checkpoint ({exc})") from exc
    if not isinstance(payload, dict) or payload.get("stage") != stage:
        found = payload.get("stage") if isinstance(payload, dict) else None
        raise ValueError(f"{path}: not a {stage} checkpoint (stage {found!r})")
    return payload
