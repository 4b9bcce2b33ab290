"""The interface of a learned stage's commands: what ``trkx.<stage>.cli`` (embedding, filter,
gnn) provides to ``trkx train STAGE`` and ``trkx infer STAGE`` (:mod:`trkx.stages.tools`).

A stage's cli module implements :class:`StageCommands` with module-level constants and
functions; the command shape, config building and output writing stay in
:mod:`trkx.stages.tools`. Nothing here imports torch.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from trkx.training.fit import FitResult


class StageCommands(Protocol):
    """One learned stage as the command line sees it (a module satisfies it)."""

    #: The stage's name: ``trkx train NAME``, and the kind of its checkpoint.
    NAME: str
    #: The top-level keys its config may have.
    SECTIONS: tuple[str, ...]
    #: ``--config`` of ``trkx train NAME`` when none is given.
    DEFAULT_CONFIG: str

    def check_config(self, config: dict[str, Any], label: str) -> None:
        """Check every key and value of every section before any work (errors name
        ``label``)."""

    def count_events(self, folder: str) -> int:
        """How many events of the stage's input ``folder`` holds."""

    def train(self, config: dict[str, Any], label: str,
              checkpoint: Path) -> FitResult | int | None:
        """Train and write ``checkpoint``: the fit's result, or an exit status where the
        process reports for itself (graph-parallel training under torchrun)."""

    def infer(self, config: dict[str, Any], label: str, checkpoint: Path, events: Path,
              out: Path, n_events: int | None) -> int:
        """Run the trained stage on the first ``n_events`` (None: all) of ``events`` and write
        one record per event to ``out``; the exit status."""
