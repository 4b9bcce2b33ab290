"""The trained GNN on disk: its config sections and weights, safe to load.

File content (``torch.save`` of a plain dict, read with ``weights_only=True``)::

    {"format": "trkx-gnn/1", "model": {InteractionGNN kwargs}, "module": {GNNModule kwargs},
     "state_dict": {name: tensor}, "metrics": {name: float}}
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from trkx.atomic import load_tensors, save_tensors
from trkx.data.errors import TrackMLFormatError
from trkx.gnn.model import InteractionGNN

FORMAT = "trkx-gnn/1"


def save_gnn_checkpoint(path: str | os.PathLike, model: InteractionGNN,
                        model_config: Mapping[str, Any], module_config: Mapping[str, Any],
                        metrics: Mapping[str, float] | None = None) -> Path:
    """Write the checkpoint atomically (temp file in the destination folder, then rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {"format": FORMAT, "model": dict(model_config), "module": dict(module_config),
               "state_dict": {k: v.detach().cpu() for k, v in model.state_dict().items()},
               "metrics": {k: float(v) for k, v in (metrics or {}).items()}}
    return save_tensors(payload, path)


def load_gnn_checkpoint(path: str | os.PathLike) -> tuple[InteractionGNN, dict[str, Any]]:
    """The model (eval mode) and the ``module`` config section of a saved checkpoint."""
    payload = load_tensors(path, "GNN checkpoint")
    if payload.get("format") != FORMAT:
        raise TrackMLFormatError(f"{path}: not a GNN checkpoint (expected format {FORMAT!r}; "
                                 "use the gnn.pt written by `trkx train gnn`)")
    model = InteractionGNN(**payload["model"])
    model.load_state_dict(payload["state_dict"])
    return model.eval(), dict(payload["module"])
