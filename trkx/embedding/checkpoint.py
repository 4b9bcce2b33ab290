"""The trained embedding on disk (format: :mod:`trkx.files.checkpoint`) and its loader."""

from __future__ import annotations

import os

from trkx.files.checkpoint import Checkpoint, build_network, load_checkpoint


def load_model(path: str | os.PathLike):
    """``(EmbeddingMLP in eval mode, Checkpoint)`` of an embedding checkpoint."""
    from trkx.embedding.model import EmbeddingMLP

    checkpoint: Checkpoint = load_checkpoint(path, "embedding")
    return build_network(checkpoint, EmbeddingMLP), checkpoint
