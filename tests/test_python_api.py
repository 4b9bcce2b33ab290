"""The Python API of the README: ``Reconstructor(config, checkpoints)(event)`` gives exactly the
tracks `trkx run` (that is, `trkx infer`) wrote for the same event."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from trkx.data.io import load_event
from trkx.pipeline.inference import TrainedPipeline
from trkx.pipeline.reconstruct import Reconstructor
from trkx.tracks.evaluate.score import score_event

pytestmark = pytest.mark.slow


def test_reconstruct_gives_the_tracks_of_trkx_run(tiny_run: tuple[Path, Path]) -> None:
    config, workdir = tiny_run
    event = workdir / "data" / "test" / "event000300000"
    reconstructor = Reconstructor(config, workdir / "checkpoints",
                                  overrides=("inference.precision=fp32",))
    assert reconstructor.pipeline(None).precisions == {"embedding": "fp32", "filter": "fp32",
                                                       "gnn": "fp32"}
    tracks = reconstructor(event).tracks
    run = pd.read_csv(workdir / "tracks" / "event000300000-tracks.csv")
    pd.testing.assert_frame_equal(tracks.sort_values("hit_id", ignore_index=True),
                                  run.sort_values("hit_id", ignore_index=True))
    truth, = load_event(event, ["truth"], detector=None)
    assert 0.0 <= score_event(truth, tracks) <= 1.0


def test_load_applies_the_pipeline_precision_to_every_stage(tiny_run: tuple[Path, Path],
                                                            ) -> None:
    config, workdir = tiny_run
    pipeline = TrainedPipeline.load(config, workdir / "checkpoints",
                                    overrides=["inference.precision=bf16"])
    assert pipeline.precisions == {"embedding": "bf16", "filter": "bf16", "gnn": "bf16"}


def test_the_shipped_models_are_chosen_per_event_not_loaded_whole(tmp_path: Path) -> None:
    """TrainedPipeline.load() alone would pick one set for every event: it points to the
    Reconstructor, which chooses per event as `trkx infer` does (both sets' byte-for-byte
    check on event 21001: tests/test_shipped_models_real_event.py)."""
    from trkx.config import ConfigError
    from trkx.models import CELLS, DEFAULT
    from trkx.pipeline.reconstruct import Reconstructor

    with pytest.raises(ConfigError, match="Reconstructor"):
        TrainedPipeline.load()
    with pytest.raises(ConfigError, match="both a pipeline config and its checkpoints"):
        Reconstructor(config="configs/pu200.yaml")(tmp_path / "event000000001")
    for part in ("hits", "cells"):
        (tmp_path / f"event000000001-{part}.csv").write_text("hit_id\n")
    (tmp_path / "event000000002-hits.csv").write_text("hit_id\n")
    reconstructor = Reconstructor()
    assert reconstructor.models_for(tmp_path / "event000000001") == CELLS
    assert reconstructor.models_for(tmp_path / "event000000002") == DEFAULT
