"""The luminous region of generated events: ``--vertex-sigma-z`` (one length or a list cycled
over the event ids) and its ``events.vertex_sigma_z`` entry in the pipeline config."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from trkx.cli import main as trkx_main
from trkx.config import ConfigError
from trkx.data.io import load_event
from trkx.data.particle_id import decode_particle_id
from trkx.data.simulate import generate_particles
from trkx.data.simulate.fitted_spectra import FIT
from trkx.data.simulate.runner import event_rng, plan_jobs
from trkx.pipeline.config import load_pipeline_config
from trkx.pipeline.steps import plan_steps

from .test_pipeline_run import tiny_config


def vertex_z(particles: pd.DataFrame) -> np.ndarray:
    """z of every primary vertex (the common vz of its prompt particles)."""
    prompt = decode_particle_id(particles["particle_id"].to_numpy())["generation"] == 0
    vertex = decode_particle_id(particles["particle_id"].to_numpy())["vertex_id"]
    return particles["vz"][prompt].groupby(vertex[prompt]).first().to_numpy()


@pytest.mark.parametrize("sigma_z", [5.5, 50.0])
def test_pileup_200_vertex_spread_matches_the_setting(sigma_z: float) -> None:
    # two pile-up-200 events: ~300 vertices, so the sample std is within ~4% (1 sigma)
    z = np.concatenate([vertex_z(generate_particles(200.0, event_rng(3, eid), sigma_z))
                        for eid in (1, 2)])
    assert z.size > 200
    assert abs(np.std(z) / sigma_z - 1.0) < 0.15
    assert abs(np.mean(z)) < 3 * sigma_z / np.sqrt(z.size)


def test_default_is_the_fitted_spread_and_leaves_events_unchanged() -> None:
    default = generate_particles(20.0, np.random.default_rng(4))
    fitted = generate_particles(20.0, np.random.default_rng(4), FIT["vertex_sigma_z"])
    pd.testing.assert_frame_equal(default, fitted)
    wide = generate_particles(20.0, np.random.default_rng(4), 50.0)
    # same particles, only the primary vertices move along z (displaced ones keep theirs)
    pd.testing.assert_frame_equal(default.drop(columns="vz"), wide.drop(columns="vz"))
    assert np.std(vertex_z(wide)) > 4 * np.std(vertex_z(default))
    with pytest.raises(ValueError, match="vertex_sigma_z"):
        generate_particles(1.0, np.random.default_rng(0), -1.0)


def test_a_list_is_cycled_over_the_event_ids() -> None:
    jobs = plan_jobs(5, seed=1, mu=10.0, first_event_id=7, vertex_sigma_z=[5.5, 50.0])
    assert [(j.event_id, j.vertex_sigma_z) for j in jobs] == [
        (7, 50.0), (8, 5.5), (9, 50.0), (10, 5.5), (11, 50.0)]
    # an event's length depends on its id alone, not on the other events of the run
    assert plan_jobs(1, 1, 10.0, 9, vertex_sigma_z=[5.5, 50.0])[0].vertex_sigma_z == 50.0
    assert all(j.vertex_sigma_z is None for j in plan_jobs(2, 1, 10.0))
    with pytest.raises(ValueError, match="replayed"):
        plan_jobs(None, 1, particles_from=".", vertex_sigma_z=[5.0])


@pytest.mark.subprocess          # --workers 2 spawns a pool
def test_cli_mix_is_reproducible_whatever_the_workers(tmp_path: Path) -> None:
    args = ["simulate", "--n-events", "2", "--seed", "4", "--pileup", "40",
            "--first-event-id", "10", "--vertex-sigma-z", "1,200"]
    assert trkx_main([*args, "--out", str(tmp_path / "one")]) == 0
    assert trkx_main([*args, "--out", str(tmp_path / "two"), "--workers", "2"]) == 0
    spread = {}
    for event in ("event000000010", "event000000011"):
        one = load_event(tmp_path / "one" / event, ["hits", "particles"])
        two = load_event(tmp_path / "two" / event, ["hits", "particles"])
        for a, b in zip(one, two):
            pd.testing.assert_frame_equal(a, b)
        spread[event] = np.std(vertex_z(one[1]))
    # event 10 takes 1 mm (10 mod 2 = 0), event 11 takes 200 mm
    assert spread["event000000010"] < 2.0 < 100.0 < spread["event000000011"]


@pytest.mark.parametrize("value", ["0", "abc", "5,", "-3,50", "nan", "inf"])
def test_cli_bad_value_is_one_line_naming_the_option(tmp_path: Path, capsys, value: str
                                                     ) -> None:
    code = trkx_main(["simulate", "--out", str(tmp_path / "x"), "--n-events", "1",
                      f"--vertex-sigma-z={value}"])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert "\n" not in err and "--vertex-sigma-z" in err and repr(value) in err
    assert not (tmp_path / "x").exists()


def test_cli_rejects_the_length_with_replayed_tables(tmp_path: Path, capsys) -> None:
    code = trkx_main(["simulate", "--out", str(tmp_path / "x"), "--particles-from",
                      str(tmp_path), "--vertex-sigma-z", "50"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err and "--vertex-sigma-z" in err


def test_help_states_the_fitted_default(capsys) -> None:
    with pytest.raises(SystemExit):
        trkx_main(["simulate", "--help"])
    assert f"default {FIT['vertex_sigma_z']:.2f}" in " ".join(capsys.readouterr().out.split())


def simulate_argv(config_path: Path, tmp_path: Path) -> list[str]:
    config = load_pipeline_config(config_path)
    step = next(s for s in plan_steps(config, tmp_path / "work") if s.name == "simulate-train")
    argv = list(step.argv)
    return argv[argv.index("--vertex-sigma-z") + 1].split(",")


def test_pipeline_default_alternates_both_releases(tmp_path: Path) -> None:
    lengths = [float(v) for v in simulate_argv(tiny_config(tmp_path), tmp_path)]
    assert lengths == [FIT["vertex_sigma_z"], 50.0]


def test_pipeline_passes_its_setting_and_rejects_a_bad_one(tmp_path: Path) -> None:
    path = tiny_config(tmp_path)
    config = yaml.safe_load(path.read_text())
    config["events"]["vertex_sigma_z"] = 30
    path.write_text(yaml.safe_dump(config))
    assert simulate_argv(path, tmp_path) == ["30.0"]
    for bad in (-1, [5.5, "x"], [], True):
        config["events"]["vertex_sigma_z"] = bad
        path.write_text(yaml.safe_dump(config))
        with pytest.raises(ConfigError, match=r"events: .*vertex_sigma_z"):
            load_pipeline_config(path)
