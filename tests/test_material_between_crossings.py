"""The material between crossings read from true momenta (trkx.realism.material): on simulated
events it finds the material the simulator put there, and it grows with it."""

from __future__ import annotations

import numpy as np
import pytest

from trkx.data.simulate import generate_particles, simulate_event
from trkx.data.simulate.event import SimulationConfig
from trkx.data.simulate.physics import SILICON_RADIATION_LENGTH, PhysicsConfig
from trkx.realism.material import (
    crossing_kicks,
    material_between_crossings,
    thickness_from_angle,
)


def _material(support_fraction: float):
    particles = generate_particles(20.0, np.random.default_rng(11))
    event = simulate_event(particles, np.random.default_rng(12), SimulationConfig(
        physics=PhysicsConfig(support_fraction=support_fraction, energy_loss=0.0)))
    table = material_between_crossings(crossing_kicks(event["hits"], event["particles"],
                                                      event["truth"]))
    return table.set_index(["same_layer", "group", "next_group"])


def test_the_highland_angle_is_inverted() -> None:
    # 1% X0 at 1 GeV: 13.6 mrad * 0.1 * (1 + 0.038 ln 0.01) = 1.122 mrad
    assert thickness_from_angle(1.1220e-3) == pytest.approx(0.01, rel=1e-3)
    assert thickness_from_angle(0.0) == 1e-6


@pytest.mark.slow
def test_the_simulated_material_is_found() -> None:
    thin, thick = _material(0.0), _material(5.9)
    # a pixel barrel layer: 0.15 mm of silicon, times 1 + support (a layer's overlapping
    # modules add up to ~1.4x); the simulator scatters after the layer, so another module of
    # the same layer sees no kick
    silicon = 0.15 / SILICON_RADIATION_LENGTH
    for table, support in ((thin, 0.0), (thick, 5.9)):
        measured = table.loc[(False, 8, 8), "x0_normal"]
        assert 0.7 < measured / (silicon * (1.0 + support)) < 2.0
        assert table.loc[(True, 8, 8), "width_mrad_gev"] < 0.05
    # 6.9x the material: 4.2x measured (the pooled widths of a mixture of incidences, and the
    # thin layers' overlaps weigh more)
    ratio = thick.loc[(False, 8, 8), "x0_normal"] / thin.loc[(False, 8, 8), "x0_normal"]
    assert 3.0 < ratio < 9.0
