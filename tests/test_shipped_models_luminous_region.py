"""The shipped cells set along the beam: on a simulated pile-up-200 event with a wide luminous
region (sigma_z 120 mm, vertices out to ~300 mm), the efficiency in each bin of the vertex |z|
(trkx.tracks.evaluate.metrics) stays above a floor that a broken model, or one that has learnt
absolute z as a prior, misses. The floors are the shipped set's measured figures on this
event, less a margin for other machines' rounding (the efficiency falls along the beam)."""

from __future__ import annotations

from pathlib import Path

import pytest

from trkx.cli import main as trkx_main
from trkx.models import CELLS, shipped_models
from trkx.pipeline.reconstruct import Reconstructor
from trkx.tracks.evaluate.event_truth import truth_from_frames
from trkx.tracks.evaluate.metrics import evaluate_event, event_summary

pytestmark = pytest.mark.slow

#: Per vertex |z| bin (mm: 0-50, 50-100, 100-150, > 150), the floor; beside it the shipped cells
#: set's figure on this event (2 cores, AVX2, fp32, trkx's signal with hits on >= 3 layers:
#: the 32 x 4 GNN, configs/recipes/pu200_cells_fast.yaml) and the bin's signal particles.
#: (Before it the 32 x 6 GNN fine-tuned with the focal factor 0.990 / 0.986 / 0.992 / 0.954,
#: the distilled 32 x 6 GNN 0.987 / 0.986 / 0.992 / 0.947;
#: on the signal of 316 / 283 / 249 / 308: the 64 x 6 set
#: 0.975 / 0.975 / 0.964 / 0.942, the set moved along the beam on the event this seed made
#: before the simulator took the real secondaries 0.963 / 0.960 / 0.959 / 0.810, the set before
#: the wide retrain 0.963 / 0.956 / 0.852 / 0.551.) Raise the floors with the models.
FLOORS = {
    "0_50": 0.97,       # 0.994 of 311
    "50_100": 0.965,    # 0.986 of 279
    "100_150": 0.97,    # 0.992 of 244
    "150_up": 0.93,     # 0.954 of 304
}


@pytest.fixture(scope="module")
def wide_event(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("wide")
    assert trkx_main(["simulate", "--out", str(folder), "--n-events", "1", "--seed", "58",
                      "--pileup", "200", "--first-event-id", "580", "--vertex-sigma-z",
                      "120"]) == 0
    return folder / "event000000580"


def test_the_cells_set_keeps_its_efficiency_along_the_beam(wide_event: Path) -> None:
    from trkx.data.io import load_event

    models = shipped_models(CELLS)
    tracks = Reconstructor(models.config, models.checkpoints)(wide_event).tracks
    hits, particles, truth = load_event(wide_event, ["hits", "particles", "truth"],
                                        detector=None)
    summary = event_summary(evaluate_event(truth_from_frames(580, hits, particles, truth),
                                           tracks))
    for name, floor in FLOORS.items():
        assert summary[f"n_signal_vz_{name}"] >= 100
        assert summary[f"efficiency_vz_{name}"] >= floor, name
