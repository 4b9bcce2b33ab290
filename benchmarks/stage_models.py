"""Trained stage models for the benchmarks, trained and read the way the commands do it.

``trained_model`` is ``trkx train STAGE --config FILE --set KEY=VALUE ... --checkpoint FILE``
(only when no checkpoint is given) followed by the stage's ``load_model``;
``embedding_point`` is the graph working point that ``trkx infer embedding`` uses.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType
from typing import Any, NamedTuple


class EmbeddingPoint(NamedTuple):
    """The embedding graph's working point and how the model's records are built."""

    radius: float
    max_neighbours: int
    use_cells: bool
    signal_pt_min: float


def trained_model(stage: ModuleType, config_path: str | Path, overrides: list[str],
                  checkpoint: str | Path | None, out_dir: Path) -> tuple[Any, Any, dict]:
    """``(network, Checkpoint, config)`` of a ``trkx.<stage>.cli`` module's model.

    ``config`` is the stage YAML with ``overrides`` applied and checked, as the commands check
    it. Without ``checkpoint`` the stage is first trained into ``out_dir/<stage>.pt``."""
    from trkx.stage_tools import stage_config

    path = Path(checkpoint) if checkpoint else Path(out_dir) / f"{stage.NAME}.pt"
    config = stage_config(config_path, [*overrides, f"checkpoint={path}"], stage)
    if checkpoint is None:
        stage.train(config, str(config_path), path)
    load_model = importlib.import_module(f"trkx.{stage.NAME}.checkpoint").load_model
    network, stored = load_model(path)
    return network, stored, config


def embedding_point(config: dict, label: str, stored: Any, radius: float | None = None,
                    max_neighbours: int | None = None) -> EmbeddingPoint:
    """Radius and k: the arguments, else the config's ``inference`` section, else the
    checkpoint's working point; cells and the signal pT cut: as the checkpoint was trained."""
    from trkx.config import instantiate, section
    from trkx.embedding.inference import EmbeddingInference
    from trkx.training.data import EmbeddingData

    options = instantiate(EmbeddingInference, section(config, "inference", label),
                          f"{label}: inference")
    trained = instantiate(EmbeddingData, stored.config.get("data") or {}, f"{stored.path}: data")
    point_radius, point_k = options.working_point(stored.working_point)
    return EmbeddingPoint(float(radius if radius is not None else point_radius),
                          int(max_neighbours if max_neighbours is not None else point_k),
                          trained.use_cells, trained.signal_pt_min)


def trained_events(stored: Any) -> int | None:
    """``data.train_events`` of the config the model was trained with."""
    return (stored.config.get("data") or {}).get("train_events")
