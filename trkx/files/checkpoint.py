"""One checkpoint format for the three learned stages (``trkx-checkpoint/1``).

A checkpoint is a plain dict written with ``torch.save`` (atomically) and read with
``torch.load(..., weights_only=True)``::

    {"format": "trkx-checkpoint/1",
     "stage": "embedding" | "filter" | "gnn",
     "constructor": {...},      # keyword arguments of the stage's network class
     "state_dict": {name: tensor},
     "working_point": {name: float},   # cuts chosen on validation (e.g. score_cut)
     "config": {...},           # the full stage config the model was trained with
     "metrics": {name: float},  # validation metrics of the exported (best) weights
     "checksum": "sha256 hex"}

The checksum is SHA-256 over, for every tensor of ``state_dict`` in name order, its name, dtype,
shape and raw bytes, followed by the canonical JSON of ``stage``, ``constructor``,
``working_point``, ``config`` and ``metrics``. :func:`load_checkpoint` recomputes it, so a file
whose bytes changed after it was written (a flipped bit inside a weight, an edited cut) is
refused with one line naming the file, never loaded silently.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trkx.files.errors import TrackMLFormatError
from trkx.stage_names import LEARNED_STAGES
from trkx.words import with_article

FORMAT = "trkx-checkpoint/1"
STAGES = LEARNED_STAGES


class CheckpointError(TrackMLFormatError):
    """A checkpoint is missing, corrupted, of another stage or of an old format."""


@dataclass(frozen=True)
class Checkpoint:
    """A verified checkpoint (see the module docstring for the fields)."""

    path: Path
    stage: str
    constructor: dict[str, Any]
    state_dict: dict[str, Any]
    working_point: dict[str, float]
    config: dict[str, Any]
    metrics: dict[str, float]


def with_working_point(values: Mapping[str, Any], working_point: Mapping[str, float] | None,
                       missing: str, optional: Collection[str] = ()) -> dict[str, Any]:
    """The one rule by which a config section meets a trained stage: every null (None) value
    of ``values`` becomes the working point's value of that key (the cut, radius or track
    length chosen on validation events); the others stay as the config sets them. A null key
    the working point lacks (or no working point) is a ``ValueError`` naming the key and
    ``missing`` (what to do about it), except the keys of ``optional``, which stay null."""
    out = dict(values)
    for key, value in values.items():
        if value is not None:
            continue
        if working_point is not None and key in working_point:
            out[key] = working_point[key]
        elif key not in optional:
            raise ValueError(f"{key} is null: {missing}")
    return out


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, default=str, separators=(",", ":")).encode()


def checksum(state_dict: Mapping[str, Any], meta: Mapping[str, Any]) -> str:
    """SHA-256 over the tensors (name, dtype, shape, bytes) and the canonical JSON of ``meta``."""
    import torch

    digest = hashlib.sha256()
    for name in sorted(state_dict):
        tensor = state_dict[name].detach().cpu().contiguous()
        digest.update(name.encode())
        digest.update(str(tensor.dtype).encode())
        digest.update(_canonical(list(tensor.shape)))
        digest.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes())
    digest.update(_canonical(dict(meta)))
    return digest.hexdigest()


def _meta(payload: Mapping[str, Any]) -> dict[str, Any]:
    return {key: payload.get(key) for key in
            ("stage", "constructor", "working_point", "config", "metrics")}


def save_checkpoint(path: str | os.PathLike, stage: str, constructor: Mapping[str, Any],
                    state_dict: Mapping[str, Any], working_point: Mapping[str, float],
                    config: Mapping[str, Any], metrics: Mapping[str, float]) -> Path:
    """Write a checkpoint atomically (temp file in the destination folder, then rename)."""
    from trkx.files.atomic import save_tensors

    if stage not in STAGES:
        raise ValueError(f"unknown stage {stage!r}")
    payload: dict[str, Any] = {
        "format": FORMAT, "stage": stage, "constructor": dict(constructor),
        "state_dict": {k: v.detach().cpu().clone() for k, v in state_dict.items()},
        "working_point": {k: float(v) for k, v in working_point.items()},
        "config": json.loads(_canonical(dict(config))),
        "metrics": {k: float(v) for k, v in metrics.items()}}
    payload["checksum"] = checksum(payload["state_dict"], _meta(payload))
    return save_tensors(payload, Path(path))


def load_checkpoint(path: str | os.PathLike, stage: str) -> Checkpoint:
    """Read and verify a checkpoint of ``stage``; :class:`CheckpointError` on anything wrong."""
    from trkx.files.atomic import DamagedFileError, load_tensors

    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: no such checkpoint (train one with `trkx train {stage}`)")
    try:
        payload = load_tensors(path, "trkx checkpoint", keep=True)
    except DamagedFileError as exc:
        raise CheckpointError(f"{exc}; corrupted? re-train with `trkx train {stage}`") from exc
    except TrackMLFormatError as exc:   # another kind of file
        raise CheckpointError(f"{exc}; give the file written by `trkx train {stage}`") from exc
    found = payload.get("format")
    if found != FORMAT:
        old = found == "trkx-gnn/1" or ("hparams" in payload and "state_dict" in payload)
        what = f"an old checkpoint format ({found or 'trkx-stage/0'})" if old else \
            f"not a trkx checkpoint (format {found!r})"
        raise CheckpointError(f"{path}: {what}; re-train it with `trkx train {stage}` or "
                              f"convert it to {FORMAT}")
    if payload.get("stage") != stage:
        raise CheckpointError(f"{path}: {with_article(str(payload.get('stage')))} checkpoint, "
                              f"not {with_article(stage)} one (give the file written by "
                              f"`trkx train {stage}`)")
    state_dict = payload.get("state_dict")
    if not isinstance(state_dict, dict) or checksum(state_dict, _meta(payload)) != \
            payload.get("checksum"):
        raise CheckpointError(f"{path}: checksum mismatch: the file is corrupted (changed "
                              f"after it was written); re-train with `trkx train {stage}`")
    return Checkpoint(path=path, stage=stage, constructor=dict(payload["constructor"]),
                      state_dict=state_dict,
                      working_point=dict(payload.get("working_point") or {}),
                      config=dict(payload.get("config") or {}),
                      metrics=dict(payload.get("metrics") or {}))


def build_network(checkpoint: Checkpoint, network_class: type) -> Any:
    """``network_class(**constructor)`` with the checkpoint's weights, in eval mode."""
    try:
        network = network_class(**checkpoint.constructor)
        network.load_state_dict(checkpoint.state_dict)
    except (TypeError, RuntimeError) as exc:
        raise CheckpointError(f"{checkpoint.path}: does not fit {network_class.__name__} "
                              f"({str(exc).splitlines()[0]})") from exc
    return network.eval()
