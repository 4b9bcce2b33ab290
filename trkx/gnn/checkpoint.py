"""The trained GNN on disk (format: :mod:`trkx.files.checkpoint`) and its loader.

``constructor`` holds the InteractionGNN keyword arguments; the ``module`` section of the stage
config (graph_ops, loss settings) travels in ``config``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from trkx.files.checkpoint import Checkpoint, build_network, load_checkpoint


def load_model(path: str | os.PathLike):
    """``(InteractionGNN in eval mode, Checkpoint)`` of a GNN checkpoint."""
    from trkx.gnn.model import InteractionGNN

    checkpoint = load_checkpoint(path, "gnn")
    return build_network(checkpoint, InteractionGNN), checkpoint


@dataclass(frozen=True)
class GNNInference:
    """Config section ``inference``: the local kernel (None: the trained module's
    ``graph_ops``) and the precision of the dense layers (trkx.runtime.precision: fp32 or bf16)."""

    graph_ops: str | None = None
    precision: str = "fp32"

    def __post_init__(self) -> None:
        from trkx.gnn.ops_factory import GRAPH_OPS_CHOICES
        from trkx.runtime.precision import check_precision

        check_precision(self.precision)
        if self.graph_ops is not None and self.graph_ops not in GRAPH_OPS_CHOICES:
            raise ValueError(f"graph_ops must be one of {', '.join(GRAPH_OPS_CHOICES)} or "
                             f"null, got {self.graph_ops!r}")

    def kernel(self, checkpoint: Checkpoint) -> str:
        """This section's ``graph_ops``, else the one the model was trained with."""
        module = checkpoint.config.get("module") or {}
        return self.graph_ops or str(module.get("graph_ops", "auto"))
