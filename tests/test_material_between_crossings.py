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


def test_the_kicks_across_the_track_are_the_scattering_in_the_events_field() -> None:
    """Less the bend of the field the event has, the azimuth's kicks are as wide as the polar
    angle's (the simulator scatters isotropically); less the bend of a field it does not have
    (the solenoid's fall-off on a uniform-field event), the strip disks' are many times wider."""
    particles = generate_particles(20.0, np.random.default_rng(11))
    event = simulate_event(particles, np.random.default_rng(12), SimulationConfig(
        physics=PhysicsConfig(support_fraction=5.9, energy_loss=0.0)))

    def widths(field_map: str):
        table = material_between_crossings(crossing_kicks(
            event["hits"], event["particles"], event["truth"], field_map=field_map))
        table = table.set_index(["same_layer", "group", "next_group"])
        return table["width_across_mrad_gev"] / table["width_mrad_gev"]

    right, wrong = widths("uniform"), widths("solenoid")
    for pair in ((False, 8, 8), (False, 7, 7), (False, 12, 12), (False, 13, 13)):
        assert 0.7 < right[pair] < 1.4, (pair, right[pair])
    assert wrong[(False, 12, 12)] > 5.0 and wrong[(False, 16, 16)] > 5.0
    assert 0.7 < wrong[(False, 8, 8)] < 1.4        # the barrel's field is the same in both
