"""The simulator's material (trkx.data.simulate.physics): the support that scatters, the energy
lost in it, the interaction rate held at its calibration, and the plumbing through
``trkx simulate --support-fraction / --energy-loss`` and the pipeline's ``events``."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import yaml

from trkx.cli import main as trkx_main
from trkx.config import ConfigError
from trkx.data.simulate import generate_particles, simulate_event
from trkx.data.simulate.event import SimulationConfig
from trkx.data.simulate.physics import PhysicsConfig, lose_energy
from trkx.pipeline.config import load_pipeline_config
from trkx.pipeline.steps import plan_steps

from .test_pipeline_run import tiny_config


def _event(**physics) -> dict[str, pd.DataFrame]:
    particles = generate_particles(10.0, np.random.default_rng(5))
    return simulate_event(particles, np.random.default_rng(6),
                          SimulationConfig(physics=PhysicsConfig(**physics)))


def _crossing_pt(event: dict[str, pd.DataFrame]) -> list[np.ndarray]:
    """Each prompt particle's pT at its crossings, ordered by distance from its vertex (>= 5
    crossings, turning less than half a turn: their distance grows along them)."""
    particles = event["particles"].set_index("particle_id")
    prompt = particles[np.hypot(particles.vx, particles.vy) < 1.0]
    truth = event["truth"][event["truth"]["particle_id"].isin(prompt.index)]
    tracks = []
    for pid, hits in truth.groupby("particle_id"):
        vertex = prompt.loc[pid]
        if len(hits) >= 5 and np.hypot(vertex.px, vertex.py) > 0.5:
            hits = hits.assign(d=np.sqrt((hits.tx - vertex.vx) ** 2 + (hits.ty - vertex.vy) ** 2
                                         + (hits.tz - vertex.vz) ** 2)).sort_values("d")
            tracks.append(np.hypot(hits.tpx, hits.tpy).to_numpy())
    return tracks


def test_energy_loss_takes_the_material_off_the_momentum() -> None:
    p = np.array([1.0, 0.2, 0.001])
    # 1.2 MeV/mm through 2 mm: 2.4 MeV lost; never more than half of the momentum
    np.testing.assert_allclose(lose_energy(p, np.full(3, 2.0), 1.2),
                               [1.0 - 0.0024, 0.2 - 0.0024, 0.0005])
    np.testing.assert_array_equal(lose_energy(p, np.full(3, 2.0), 0.0), p)


def test_particles_lose_pt_along_their_track_only_with_energy_loss() -> None:
    without = _crossing_pt(_event(multiple_scattering=False))
    # without loss (and without scattering, which trades pT for pz) the pT is constant
    assert max(np.ptp(t) / t[0] for t in without) < 1e-9
    losing = _crossing_pt(_event(multiple_scattering=False, energy_loss=1.2))
    drops = np.array([1.0 - t[-1] / t[0] for t in losing])
    # each layer takes some off (two overlapping modules of one layer share their pT)
    assert all(np.all(np.diff(t) <= 1e-12) and t[-1] < t[0] for t in losing)
    assert 0.0005 < np.median(drops) < 0.2


def test_support_scatters_more_at_the_same_interaction_rate() -> None:
    thin, thick = _event(), _event(support_fraction=5.9)
    # the same particles end about as often (the interaction rate is held at its calibration)
    assert abs(len(thick["hits"]) / len(thin["hits"]) - 1.0) < 0.05

    def kink(event):     # the RMS change of pT direction between consecutive crossings
        truth = event["truth"][event["truth"]["particle_id"] != 0]
        angles = []
        for _, hits in truth.groupby("particle_id"):
            hits = hits.assign(d=np.hypot(hits.tx, hits.ty)).sort_values("d")
            theta = np.arctan2(np.hypot(hits.tpx, hits.tpy), hits.tpz).to_numpy()
            angles.append(np.diff(theta))
        return float(np.sqrt(np.mean(np.concatenate(angles) ** 2)))

    # 3.45x the material: ~1.9x the scattering angle (sqrt, and Highland's log term)
    assert 1.5 < kink(thick) / kink(thin) < 2.3


def test_the_material_is_checked_and_reaches_trkx_simulate(tmp_path, capsys) -> None:
    with pytest.raises(ValueError, match="support_fraction must be >= 0"):
        PhysicsConfig(support_fraction=-1.0)
    with pytest.raises(ValueError, match="energy_loss must be >= 0"):
        PhysicsConfig(energy_loss=float("nan"))
    assert trkx_main(["simulate", "--out", str(tmp_path / "ok"), "--n-events", "1",
                      "--pileup", "1", "--support-fraction", "5.9", "--energy-loss", "1.2"]) == 0
    assert trkx_main(["simulate", "--out", str(tmp_path / "bad"), "--n-events", "1",
                      "--energy-loss", "-1"]) == 2
    assert "--energy-loss must be >= 0 MeV/mm, got -1.0" in capsys.readouterr().err
    assert not (tmp_path / "bad").exists()


def test_the_pipeline_simulates_its_events_in_the_material_it_names(tmp_path) -> None:
    path = tiny_config(tmp_path)
    config = yaml.safe_load(path.read_text())

    def train_argv() -> list[str]:
        path.write_text(yaml.safe_dump(config))
        steps = plan_steps(load_pipeline_config(path), tmp_path / "work")
        return list(next(s for s in steps if s.name == "simulate-train").argv)

    assert "--energy-loss" not in train_argv() and "--support-fraction" not in train_argv()
    config["events"].update(support_fraction=5.9, energy_loss=1.2)
    argv = train_argv()
    assert argv[argv.index("--support-fraction") + 1] == "5.9"
    assert argv[argv.index("--energy-loss") + 1] == "1.2"
    config["events"]["energy_loss"] = -0.5
    with pytest.raises(ConfigError, match=r"events: .*energy_loss must be >= 0"):
        train_argv()
