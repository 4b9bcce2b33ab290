"""The trained GNN on disk (format: :mod:`trkx.checkpoint`) and its loader.

``constructor`` holds the InteractionGNN keyword arguments; the ``module`` section of the stage
config (graph_ops, loss settings) travels in ``config``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trkx.checkpoint import Checkpoint, build_network, load_checkpoint, save_checkpoint


def load_model(path: str | os.PathLike):
    """``(InteractionGNN in eval mode, Checkpoint)`` of a GNN checkpoint."""
    from trkx.gnn.model import InteractionGNN

    checkpoint = load_checkpoint(path, "gnn")
    return build_network(checkpoint, InteractionGNN), checkpoint


def save_gnn_checkpoint(path: str | os.PathLike, model: Any, model_config: Mapping[str, Any],
                        module_config: Mapping[str, Any],
                        metrics: Mapping[str, float] | None = None) -> Path:
    """Write a GNN trained outside :func:`trkx.training.fit_stage` (the torchrun loop)."""
    import inspect

    from trkx.gnn.module import GNNModule

    default = inspect.signature(GNNModule).parameters["edge_cut"].default
    edge_cut = module_config.get("edge_cut", default)
    return save_checkpoint(path, "gnn", model_config, model.state_dict(),
                           {"edge_cut": float(edge_cut)},
                           {"model": dict(model_config), "module": dict(module_config)},
                           metrics or {})


def load_gnn_checkpoint(path: str | os.PathLike):
    """``(InteractionGNN, module config section)``, for callers of the older interface."""
    model, checkpoint = load_model(path)
    return model, dict(checkpoint.config.get("module") or {})


@dataclass(frozen=True)
class GNNInference:
    """Config section ``inference``: the local kernel (None: the trained module's
    ``graph_ops``) and the precision of the dense layers (trkx.precision: fp32 or bf16)."""

    graph_ops: str | None = None
    precision: str = "fp32"

    def __post_init__(self) -> None:
        from trkx.gnn.ops_factory import GRAPH_OPS_CHOICES
        from trkx.precision import check_precision

        check_precision(self.precision)
        if self.graph_ops is not None and self.graph_ops not in GRAPH_OPS_CHOICES:
            raise ValueError(f"graph_ops must be one of {', '.join(GRAPH_OPS_CHOICES)} or "
                             f"null, got {self.graph_ops!r}")

    def kernel(self, checkpoint: Checkpoint) -> str:
        """This section's ``graph_ops``, else the one the model was trained with."""
        module = checkpoint.config.get("module") or {}
        return self.graph_ops or str(module.get("graph_ops", "auto"))
