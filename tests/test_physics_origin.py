"""trkx/tracks/evaluate/stage_losses.py: track efficiency by the particles' production radius."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
import pytest

from trkx.tracks.evaluate.stage_losses import efficiency_by_origin


def test_signal_particles_are_binned_by_production_radius() -> None:
    particles = pd.DataFrame({
        "particle_id": [1, 2, 3, 4, 5, 6],
        "signal": [True, True, True, True, True, False],
        "n_matched_tracks": [1, 0, 1, 0, 2, 1],
    })
    evaluation = SimpleNamespace(event_id=7, particles=particles)
    # r_v: two prompt (1.0 mm is still prompt), then 5, 50 and 500 mm; particle 6 is no signal
    radius = {7: {1: 0.01, 2: 1.0, 3: 5.0, 4: 50.0, 5: 500.0, 6: 5.0}}
    result = efficiency_by_origin([evaluation], radius)
    assert result["prompt"]["signal_particles"] == 2
    assert result["prompt"]["efficiency"] == pytest.approx(0.5)
    assert result["prompt"]["efficiency_err"] == pytest.approx(0.5 / 2 ** 0.5)
    assert result["displaced"]["signal_particles"] == 3
    assert result["displaced"]["efficiency"] == pytest.approx(2 / 3)
    per_bin = [(b["signal_particles"], b["efficiency"]) for b in result["per_bin"]]
    assert per_bin[:2] == [(2, 0.5), (1, 1.0)]              # [0, 1] mm, (1, 10] mm
    assert per_bin[3] == (1, 0.0) and per_bin[5] == (1, 1.0)  # (30, 100], (300, inf)
    assert per_bin[2][0] == 0 and per_bin[4][0] == 0
