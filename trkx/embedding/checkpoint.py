"""The trained embedding on disk (format: :mod:`trkx.checkpoint`) and its loader."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from trkx.checkpoint import Checkpoint, build_network, load_checkpoint

#: EmbeddingModule hyperparameters that are EmbeddingMLP constructor arguments.
NETWORK_KEYS: tuple[str, ...] = ("in_features", "hidden", "layers", "embedding_dim",
                                 "layer_norm")


def network_constructor(hparams: Mapping[str, Any]) -> dict[str, Any]:
    """The EmbeddingMLP keyword arguments of an EmbeddingModule's hyperparameters."""
    return {key: hparams[key] for key in NETWORK_KEYS}


def load_model(path: str | os.PathLike):
    """``(EmbeddingMLP in eval mode, Checkpoint)`` of an embedding checkpoint."""
    from trkx.embedding.model import EmbeddingMLP

    checkpoint: Checkpoint = load_checkpoint(path, "embedding")
    return build_network(checkpoint, EmbeddingMLP), checkpoint
