"""Both model sets shipped with trkx load (checksums, weights_only) and find tracks in the full
real pile-up-200 event 21001 (which has cells: the cells set reads them, the hits-only set
ignores them): the pixel-projected efficiency stays above a floor that a broken or swapped
model misses (each card's measured figure, less a margin for other machines' rounding)."""

from __future__ import annotations

from pathlib import Path

import pytest

from trkx.models import CELLS, DEFAULT, shipped_models
from trkx.pipeline.inference import TrainedPipeline
from trkx.tracks.metrics import overall_summary
from trkx.tracks.projection import evaluate_pixel_truth

pytestmark = pytest.mark.slow

#: Measured with each shipped set: trkx/models/NAME/card.md (real_pixel_efficiency).
EFFICIENCY_FLOORS = {
    DEFAULT: 0.70,    # measured 0.740 +- 0.012 (2 cores, AVX2, fp32; points re-tuned; 0.728 before)
    CELLS: 0.92,      # measured 0.947 +- 0.006 (2 cores, AVX2, fp32; seventh stretch; 0.844 first)
}
#: Signal particles of event 21001 (pT > 1 GeV, >= 3 pixel hits with truth: 1,234 of the
#: README's 1,238 keep 3 once the 0.3% of pixel hits without recovered truth are left out).
SIGNAL_PARTICLES = 1234


def test_both_sets_fit_the_size_budget() -> None:
    assert shipped_models(DEFAULT).megabytes() + shipped_models(CELLS).megabytes() <= 20.0


@pytest.mark.parametrize("name", [CELLS, DEFAULT])
def test_shipped_models_find_tracks_in_the_real_event(trackml_dir: Path, name: str) -> None:
    models = shipped_models(name)
    pipeline = TrainedPipeline.load(models.config, models.checkpoints)
    assert pipeline.use_cells == (name == CELLS)
    assert pipeline.precisions == {"embedding": "fp32", "filter": "fp32", "gnn": "fp32"}
    prefix = trackml_dir / "real_pixel_truth" / "event000021001"
    tracks = pipeline.reconstruct(prefix)
    assert len(tracks) == 120_844
    summary = overall_summary([evaluate_pixel_truth(prefix, tracks, 21001)])
    assert summary["n_signal_particles"] == SIGNAL_PARTICLES
    assert summary["efficiency"] >= EFFICIENCY_FLOORS[name]
