"""The models shipped with trkx load (checksums, weights_only) and find tracks in the full real
pile-up-200 event 21001: the pixel-projected efficiency stays above a floor that a broken or
swapped model misses (the card's measured figure, less a margin for other machines' rounding)."""

from __future__ import annotations

from pathlib import Path

import pytest

from trkx.models import shipped_models
from trkx.pipeline.inference import TrainedPipeline
from trkx.tracks.metrics import overall_summary
from trkx.tracks.projection import evaluate_pixel_truth

pytestmark = pytest.mark.slow

#: Measured with the shipped models: see trkx/models/pu200/card.md (real_pixel_efficiency).
EFFICIENCY_FLOOR = 0.68      # measured 0.728 +- 0.013 (2 cores, AVX2, fp32; 0.408 before)
#: Signal particles of event 21001 (pT > 1 GeV, >= 3 pixel hits with truth: 1,234 of the
#: README's 1,238 keep 3 once the 0.3% of pixel hits without recovered truth are left out).
SIGNAL_PARTICLES = 1234


def test_shipped_models_find_tracks_in_the_real_event(trackml_dir: Path) -> None:
    models = shipped_models()
    assert models.megabytes() <= 20.0
    pipeline = TrainedPipeline.load()
    assert pipeline.precisions == {"embedding": "fp32", "filter": "fp32", "gnn": "fp32"}
    prefix = trackml_dir / "real_pixel_truth" / "event000021001"
    tracks = pipeline.reconstruct(prefix)
    assert len(tracks) == 120_844
    summary = overall_summary([evaluate_pixel_truth(prefix, tracks, 21001)])
    assert summary["n_signal_particles"] == SIGNAL_PARTICLES
    assert summary["efficiency"] >= EFFICIENCY_FLOOR
