"""The trained edge filter on disk (format: :mod:`trkx.files.checkpoint`), its loader and the
inference options that may override its working point."""

from __future__ import annotations

import os
from dataclasses import dataclass

from trkx.files.checkpoint import (
    Checkpoint,
    build_network,
    load_checkpoint,
    with_working_point,
)


@dataclass(frozen=True)
class FilterInference:
    """Config section ``inference``: the score cut (None: the checkpoint's working point), the
    number of edges scored at once and the precision of the dense layers
    (trkx.runtime.precision)."""

    score_cut: float | None = None
    chunk_size: int = 500_000
    precision: str = "fp32"

    def __post_init__(self) -> None:
        from trkx.runtime.precision import check_precision

        check_precision(self.precision)
        if self.score_cut is not None and not 0.0 <= self.score_cut <= 1.0:
            raise ValueError(f"score_cut must be in [0, 1], got {self.score_cut}")
        if self.chunk_size < 1:
            raise ValueError(f"chunk_size must be >= 1, got {self.chunk_size}")

    def cut(self, checkpoint: Checkpoint) -> float:
        """This section's ``score_cut``, else the checkpoint's working point
        (trkx.files.checkpoint.with_working_point)."""
        values = with_working_point(
            {"score_cut": self.score_cut}, checkpoint.working_point,
            f"{checkpoint.path} has no score_cut in its working point; set inference.score_cut")
        return float(values["score_cut"])


def load_model(path: str | os.PathLike):
    """``(FilterMLP in eval mode, Checkpoint)`` of a filter checkpoint."""
    from trkx.filter.model import FilterMLP

    checkpoint = load_checkpoint(path, "filter")
    return build_network(checkpoint, FilterMLP), checkpoint
