"""The simulator's magnetic field (trkx.data.simulate.physics): uniform, or the solenoid's
fall-off along the beam fitted to the real sample event, and its plumbing through
``trkx simulate --field-map`` and the pipeline's ``events.field_map``."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from trkx.cli import main as trkx_main
from trkx.data.simulate import generate_particles, simulate_event
from trkx.data.simulate.event import SimulationConfig
from trkx.data.simulate.physics import PhysicsConfig
from trkx.pipeline.config import EventPlan


def test_the_solenoid_map_falls_off_along_the_beam() -> None:
    solenoid = PhysicsConfig(field_map="solenoid")
    z = np.array([0.0, 400.0, 900.0, 1924.0, -1924.0, 3000.0])
    field = solenoid.field_at(z)
    np.testing.assert_allclose(field[0], 2.0, rtol=1e-12)         # 2 T at the centre
    assert 1.95 < field[1] < 2.0 and 1.8 < field[2] < 1.9          # the real event: 1.96, 1.85
    np.testing.assert_allclose(field[3], field[4])                   # symmetric in z
    assert 0.95 < field[3] < 1.05 and field[5] < 0.15
    np.testing.assert_array_equal(PhysicsConfig().field_at(z), np.full(6, 2.0))
    with pytest.raises(ValueError, match="field_map 'dipole' is not one of uniform, solenoid"):
        PhysicsConfig(field_map="dipole")


def _curvature_field(event: dict[str, pd.DataFrame], z_range: tuple[float, float]) -> float:
    """The median field (T) that the curvature of three consecutive true crossings of each
    particle and its transverse momentum there imply, for middle crossings in ``z_range``."""
    truth = event["truth"][event["truth"]["particle_id"] != 0]
    fields = []
    for _, hits in truth.groupby("particle_id"):
        hits = hits.assign(r=np.hypot(hits.tx, hits.ty)).sort_values("r")
        x, y, z = hits.tx.to_numpy(), hits.ty.to_numpy(), hits.tz.to_numpy()
        pt = np.hypot(hits.tpx, hits.tpy).to_numpy()
        for i in range(1, len(hits) - 1):
            a, b, c = (np.array([x[j], y[j]]) for j in (i - 1, i, i + 1))
            sides = [np.linalg.norm(b - a), np.linalg.norm(c - b), np.linalg.norm(a - c)]
            area = abs((b - a)[0] * (c - a)[1] - (b - a)[1] * (c - a)[0]) / 2
            if min(sides[:2]) > 20 and area > 0 and z_range[0] <= abs(z[i]) < z_range[1]:
                radius = np.prod(sides) / (4 * area)
                fields.append(pt[i] / (0.3 * radius / 1000))
    return float(np.median(fields))


def test_particles_curve_in_the_field_of_where_they_are() -> None:
    particles = generate_particles(10.0, np.random.default_rng(3))
    config = SimulationConfig(physics=PhysicsConfig(field_map="solenoid",
                                                    multiple_scattering=False))
    solenoid = simulate_event(particles, np.random.default_rng(4), config)
    uniform = simulate_event(particles, np.random.default_rng(4),
                             SimulationConfig(physics=PhysicsConfig(multiple_scattering=False)))
    assert abs(_curvature_field(uniform, (1200.0, 1600.0)) - 2.0) < 0.02
    central = _curvature_field(solenoid, (0.0, 300.0))
    forward = _curvature_field(solenoid, (1200.0, 1600.0))
    assert abs(central - 1.99) < 0.03
    # the middle crossing's z picks the bin; its two arcs see the field between the crossings
    low, high = PhysicsConfig(field_map="solenoid").field_at(np.array([1600.0, 1200.0]))
    assert low - 0.1 < forward < high and forward < central - 0.2


def test_trkx_simulate_takes_the_field_map(tmp_path, capsys) -> None:
    assert trkx_main(["simulate", "--out", str(tmp_path), "--n-events", "1", "--pileup", "1",
                      "--field-map", "solenoid"]) == 0
    with pytest.raises(SystemExit):
        trkx_main(["simulate", "--out", str(tmp_path), "--n-events", "1", "--field-map",
                   "dipole"])
    assert "invalid choice: 'dipole'" in capsys.readouterr().err


def test_the_pipeline_names_the_field_map_of_its_events() -> None:
    assert EventPlan(field_map="solenoid").field_map == "solenoid"
    with pytest.raises(ValueError, match="field_map 'flat' is not one of"):
        EventPlan(field_map="flat")
