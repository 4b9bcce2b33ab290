"""The tracks of TrackML events from Python, as ``trkx infer`` makes them.

:class:`Reconstructor` is the Python face of the command (its engine is
:class:`trkx.pipeline.inference.TrainedPipeline`): it chooses the models per event
exactly as ``trkx infer`` does (trkx.pipeline.model_sets: without a config and checkpoints,
the shipped cells set on an event with a cells file, the hits-only set on the others), loads
each set once, and says which set it used::

    from trkx.pipeline.reconstruct import Reconstructor

    reconstructor = Reconstructor()                 # the shipped models, chosen per event
    result = reconstructor("data/event000021001")
    result.tracks, result.parameters, result.models  # "pu200_cells" on an event with cells
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

if TYPE_CHECKING:
    from trkx.pipeline.inference import TrainedPipeline


@dataclass(frozen=True, eq=False)
class Reconstruction:
    """The tracks of one event, their parameters, and the models that made them (the shipped
    set's name, or None for the models given to the :class:`Reconstructor`)."""

    tracks: pd.DataFrame
    parameters: pd.DataFrame
    models: str | None
    seconds: dict[str, float]


@dataclass
class Reconstructor:
    """Tracks of TrackML events from Python, as ``trkx infer`` makes them (module docstring).

    ``config`` and ``checkpoints`` (both or neither) name your own models; ``overrides`` are
    ``--set``-style pipeline config overrides; ``device`` is ``auto``, ``cpu`` or ``cuda``.
    """

    config: str | os.PathLike | None = None
    checkpoints: str | os.PathLike | None = None
    overrides: tuple[str, ...] = ()
    device: str = "auto"
    _pipelines: dict[str | None, TrainedPipeline] = field(default_factory=dict, repr=False)
    _detector: Any = field(default=None, repr=False)

    def models_for(self, prefix: str | os.PathLike) -> str | None:
        """The shipped set an event gets (None: the models given)."""
        from trkx.pipeline.model_sets import model_groups

        group, = model_groups(self._path(self.config), self._path(self.checkpoints),
                              [str(prefix)])
        return group.name

    def pipeline(self, name: str | None) -> TrainedPipeline:
        """The loaded pipeline of a set (loaded once)."""
        from trkx.pipeline.inference import TrainedPipeline

        if name not in self._pipelines:
            if name is None:
                self._pipelines[name] = TrainedPipeline.load(self.config, self.checkpoints,
                                                             self.overrides, self.device)
            else:
                from trkx.models import shipped_models

                shipped = shipped_models(name)
                self._pipelines[name] = TrainedPipeline.load(
                    shipped.config, shipped.checkpoints, self.overrides, self.device)
        return self._pipelines[name]

    def __call__(self, prefix: str | os.PathLike) -> Reconstruction:
        """The tracks of the event ``prefix`` (``dir/eventNNNNNNNNN``)."""
        from trkx.data.detector import load_detector

        if (self.config is None) != (self.checkpoints is None):
            from trkx.config import ConfigError

            raise ConfigError("give both a pipeline config and its checkpoints, or neither "
                              "(the shipped models)")
        if self._detector is None:
            self._detector = load_detector()
        name = self.models_for(prefix)
        event = self.pipeline(name).event_tracks(self._detector, prefix)
        return Reconstruction(event.tracks, event.parameters, name, event.seconds)

    @staticmethod
    def _path(value: str | os.PathLike | None) -> Path | None:
        return None if value is None else Path(value)
