"""The shipped cells set along the beam: on a simulated pile-up-200 event with a wide luminous
region (sigma_z 120 mm, vertices out to ~300 mm), the efficiency in each bin of the vertex |z|
(trkx.tracks.evaluate.metrics) stays above a floor that a broken model, or one that has learnt
absolute
z as a prior, misses. The floors are the shipped set's measured figures on this event, less a
margin for other machines' rounding (issue 58: the efficiency falls along the beam)."""

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
#: set's figure on this event (2 cores, AVX2, fp32: its embedding and filter moved along the
#: beam by 200 mm and the second pass over the lone hits, configs/recipes/pu200_cells_far.yaml), the
#: set before it on the same event (its GNN fine-tuned on patches), and the bin's signal
#: particles (the far set without the second pass: 0.975 / 0.975 / 0.964 / 0.929). (The
#: sets before those were measured on the event this seed made before the simulator took the
#: real secondaries: the set moved along the beam 0.963 / 0.960 / 0.959 / 0.810, the set
#: before the wide retrain 0.963 / 0.956 / 0.852 / 0.551.) Raise the floors with the models
#: (issue 58).
FLOORS = {
    "0_50": 0.955,      # 0.975 (0.975) of 316
    "50_100": 0.955,    # 0.975 (0.975) of 283
    "100_150": 0.945,   # 0.964 (0.968) of 249
    "150_up": 0.915,    # 0.942 (0.916) of 308
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
