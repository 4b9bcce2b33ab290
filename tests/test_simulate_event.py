"""Simulated events: cells, determinism, validity, weights, particle ids, and the CLI."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from trkx.cli import main as trkx_main
from trkx.data.detector import load_detector
from trkx.data.io import load_event
from trkx.data.particle_id import decode_particle_id, encode_particle_id
from trkx.data.simulate import generate_particles, simulate_event
from trkx.data.simulate import particles as particles_module
from trkx.data.truth import pseudorapidity


@pytest.fixture(scope="module")
def small_event() -> dict[str, pd.DataFrame]:
    rng = np.random.default_rng(7)
    return simulate_event(generate_particles(3.0, rng), rng)


def test_particle_id_bit_fields_round_trip():
    fields = {"vertex_id": np.array([1, 202, 2047]), "primary_id": np.array([1, 61443, 7]),
              "generation": np.array([0, 1, 3]), "secondary_id": np.array([0, 5, 4095]),
              "process": np.array([0, 0, 2])}
    pid = encode_particle_id(**fields)
    decoded = decode_particle_id(pid)
    for key, value in fields.items():
        np.testing.assert_array_equal(decoded[key], value)
    # a real TrackML id: primary vertex 1, particle 1 -> 2**52 + 2**36
    assert encode_particle_id(1, 1) == 4503668346847232
    with pytest.raises(ValueError):
        encode_particle_id(4096, 1)


def test_generated_particles_have_unique_ids_and_scale_with_pileup():
    rng = np.random.default_rng(3)
    small = generate_particles(2.0, rng)
    large = generate_particles(20.0, rng)
    assert small["particle_id"].is_unique and large["particle_id"].is_unique
    assert set(np.abs(large["q"])) == {1}
    assert 3 * len(small) < len(large)


def _eta(table: pd.DataFrame) -> np.ndarray:
    return pseudorapidity(table["px"].to_numpy(), table["py"].to_numpy(), table["pz"].to_numpy())


def test_generated_particles_stay_inside_the_challenge_acceptance(monkeypatch):
    """Every particle within |eta| <= 4, as in the real tables; the redraws leave the event's
    random stream alone, so every particle drawn inside the first time is unchanged."""
    accepted = generate_particles(200.0, np.random.default_rng(11))
    monkeypatch.setattr(particles_module, "ETA_MAX", np.inf)
    unbounded = generate_particles(200.0, np.random.default_rng(11))
    assert np.abs(_eta(accepted)).max() <= 4.0
    beyond = np.abs(_eta(unbounded)) > 4.0
    assert beyond.any()                       # the redraws are exercised
    assert len(accepted) == len(unbounded)    # drawn again, not dropped
    inside = unbounded.loc[~beyond].set_index("particle_id")
    pd.testing.assert_frame_equal(accepted.set_index("particle_id").loc[inside.index], inside)
    redrawn = accepted.set_index("particle_id").loc[unbounded.loc[beyond, "particle_id"]]
    assert (decode_particle_id(redrawn.index.to_numpy())["generation"] == 1).all()


def test_cells_reproduce_the_hit_position_within_a_pitch(small_event):
    detector = load_detector()
    hits, cells, truth = small_event["hits"], small_event["cells"], small_event["truth"]
    index = detector.module_index(hits["volume_id"], hits["layer_id"], hits["module_id"])
    module_of = pd.Series(index, index=hits["hit_id"])
    m = module_of.loc[cells["hit_id"]].to_numpy()
    u, v = detector.cell_center(m, cells["ch0"].to_numpy(), cells["ch1"].to_numpy())
    w = cells["value"].to_numpy(np.float64)
    grouped = pd.DataFrame({"hit_id": cells["hit_id"], "wu": w * u, "wv": w * v, "w": w})
    sums = grouped.groupby("hit_id").sum()
    centroid = np.stack([sums["wu"] / sums["w"], sums["wv"] / sums["w"]], 1)
    frame = hits.set_index("hit_id").loc[sums.index]
    rows = index[pd.Index(hits["hit_id"]).get_indexer(sums.index)]
    local_hit = detector.global_to_local(rows, frame[["x", "y", "z"]].to_numpy())
    # the written hit is the value-weighted centroid of its written cells
    np.testing.assert_allclose(local_hit[:, :2], centroid, atol=2e-3)
    assert np.all(np.abs(local_hit[:, 2]) < 1e-2)
    # and the centroid reproduces the true crossing within one pitch
    signal = truth.set_index("hit_id").loc[sums.index]
    is_signal = signal["particle_id"].to_numpy() != 0
    local_true = detector.global_to_local(rows, signal[["tx", "ty", "tz"]].to_numpy())
    du = np.abs(local_true[:, 0] - local_hit[:, 0])[is_signal] / detector.pitch_u[rows][is_signal]
    dv = np.abs(local_true[:, 1] - local_hit[:, 1])[is_signal] / detector.pitch_v[rows][is_signal]
    assert is_signal.sum() > 100
    assert np.mean((du <= 1.0) & (dv <= 1.0)) > 0.98


def test_simulation_is_deterministic_for_a_seed():
    particles = generate_particles(1.0, np.random.default_rng(11))
    first = simulate_event(particles, np.random.default_rng(5))
    second = simulate_event(particles, np.random.default_rng(5))
    other = simulate_event(particles, np.random.default_rng(6))
    for part in first:
        pd.testing.assert_frame_equal(first[part], second[part])
    assert not first["hits"][["x", "y", "z"]].equals(other["hits"][["x", "y", "z"]])


def test_truth_weights_nhits_and_noise(small_event):
    truth, particles = small_event["truth"], small_event["particles"]
    assert truth["weight"].sum() == pytest.approx(1.0, abs=1e-9)
    assert (truth.loc[truth["particle_id"] == 0, "weight"] == 0).all()
    counts = truth[truth["particle_id"] != 0].groupby("particle_id").size()
    nhits = particles.set_index("particle_id")["nhits"]
    pd.testing.assert_series_equal(nhits[nhits > 0].sort_index(), counts.sort_index(),
                                   check_names=False, check_dtype=False)
    noise = (truth["particle_id"] == 0).mean()
    assert 0.10 < noise < 0.25


@pytest.mark.subprocess
def test_cli_writes_events_that_pass_validation(tmp_path, capsys):
    out = tmp_path / "sim"
    code = trkx_main(["simulate", "--out", str(out), "--n-events", "2", "--seed", "4",
                      "--pileup", "2", "--first-event-id", "77"])
    assert code == 0
    prefixes = sorted(p.name.split("-")[0] for p in out.glob("*-hits.csv.gz"))
    assert prefixes == ["event000000077", "event000000078"]
    hits, _cells, _particles, truth = load_event(out / "event000000077")
    assert len(hits) == len(truth) > 0
    assert truth["weight"].sum() == pytest.approx(1.0, abs=1e-5)
    # same seed, same event id -> same files, also when events run in worker processes
    again = tmp_path / "again"
    trkx_main(["simulate", "--out", str(again), "--n-events", "2", "--seed", "4", "--pileup", "2",
               "--first-event-id", "77", "--workers", "2"])
    for event in ("event000000077", "event000000078"):
        for part, frame in zip(("hits", "truth"), load_event(again / event, ["hits", "truth"])):
            pd.testing.assert_frame_equal(frame, load_event(out / event, [part])[0])


def test_cli_particles_from_keeps_event_and_particle_ids(tmp_path):
    source = tmp_path / "source"
    source.mkdir()
    table = generate_particles(2.0, np.random.default_rng(1))
    table["nhits"] = 0
    table.to_csv(source / "event000000042-particles.csv", index=False)
    out = tmp_path / "replayed"
    assert trkx_main(["simulate", "--out", str(out), "--particles-from", str(source),
                      "--seed", "1"]) == 0
    particles, truth = load_event(out / "event000000042", ["particles", "truth"])
    np.testing.assert_array_equal(particles["particle_id"].to_numpy(),
                                  table["particle_id"].to_numpy())
    np.testing.assert_allclose(particles["px"].to_numpy(), table["px"].to_numpy(), rtol=1e-6)
    assert set(truth["particle_id"]) - {0} <= set(table["particle_id"])
    assert particles["nhits"].sum() > 0


def test_cli_rejects_bad_arguments(tmp_path, capsys):
    assert trkx_main(["simulate", "--out", str(tmp_path), "--n-events", "1",
                      "--pileup", "0"]) == 2
    assert "--pileup must be > 0, got 0.0" in capsys.readouterr().err
    assert trkx_main(["simulate", "--out", str(tmp_path),
                      "--particles-from", str(tmp_path / "missing")]) == 2
