"""trkx/realism/distributions.py and benchmarks/sim_vs_real.py: the distributions of an
event, their TVD, the pixel projection and subsampling, and the benchmark's command line."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from trkx.data.particle_id import encode_particle_id
from trkx.data.simulate import generate_particles, simulate_event
from trkx.realism.distributions import (
    compare,
    event_samples,
    event_view,
    histogram,
    pool,
    subsample,
    tvd,
    tvd_floor,
)


def test_tvd_of_known_histograms() -> None:
    assert tvd([1, 2, 3], [2, 4, 6]) == 0.0
    assert tvd([1, 0], [0, 5]) == 1.0
    assert tvd([3, 1], [1, 1]) == pytest.approx(0.25)    # |0.75 - 0.5|
    with pytest.raises(ValueError):
        tvd([0, 0], [1, 1])


def test_histogram_puts_out_of_range_values_in_the_end_bins() -> None:
    edges = np.array([0.0, 1.0, 2.0, 3.0])
    np.testing.assert_array_equal(histogram([-5, 0.5, 1.0, 2.5, 99], edges), [2, 1, 2])
    np.testing.assert_array_equal(histogram([7, 7, 9], None, np.array([7, 8, 9])), [2, 0, 1])


def test_floor_shrinks_with_the_sample_size() -> None:
    rng = np.random.default_rng(0)
    hist = np.array([10.0, 30.0, 40.0, 20.0])
    assert tvd_floor(hist, 10_000, rng) < 0.02 < tvd_floor(hist, 50, rng) < 0.3


def hand_made_event() -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Particle A (prompt, pT 2 GeV, eta 0): barrel layers 8/2, 8/4 (two overlapping hits),
    8/6 and strip layer 13/2; particle B (made at r = 50 mm): 8/6 only; one noise hit."""
    a = int(encode_particle_id(1, 1))
    b = int(encode_particle_id(1, 2, generation=1, secondary_id=1))
    hits = pd.DataFrame({
        "hit_id": [1, 2, 3, 4, 5, 6, 7],
        "x": [32.0, 72.0, 72.5, 116.0, 500.0, 116.0, 116.0],
        "y": [0.0, 0.0, 1.0, 0.0, 0.0, 5.0, -40.0],
        "z": [0.0, 0.0, 0.0, 0.0, 0.0, 3.0, 100.0],
        "volume_id": [8, 8, 8, 8, 13, 8, 8],
        "layer_id": [2, 4, 4, 6, 2, 6, 6],
        "module_id": [1, 1, 2, 1, 1, 3, 4]})
    particles = pd.DataFrame({"particle_id": [a, b], "vx": [0.0, 50.0], "vy": [0.0, 0.0],
                              "vz": [0.0, 0.0], "px": [2.0, 0.5], "py": [0.0, 0.0],
                              "pz": [0.0, 0.0], "q": [1, -1]})
    truth = pd.DataFrame({"hit_id": [1, 2, 3, 4, 5, 6, 7],
                          "particle_id": [a, a, a, a, a, b, 0]})
    cells = pd.DataFrame({"hit_id": [1, 1, 2, 5], "ch0": [1, 2, 1, 1], "ch1": [1, 1, 1, 1],
                          "value": [0.2, 0.1, 0.4, 1.0]})
    return hits, cells, particles, truth


def hand_made_event_with_strips() -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """:func:`hand_made_event` plus six strip hits (8-13, volume 13) of particle A:
    ``(hits, particles, truth)``."""
    hits, _cells, particles, truth = hand_made_event()
    a = int(particles["particle_id"][0])
    strips = pd.DataFrame({"hit_id": np.arange(8, 14), "x": 500.0 + 100 * np.arange(6),
                           "y": 0.0, "z": 0.0, "volume_id": 13, "layer_id": 4,
                           "module_id": np.arange(6)})
    truth = pd.concat([truth, pd.DataFrame({"hit_id": strips["hit_id"], "particle_id": a})],
                      ignore_index=True)
    return pd.concat([hits, strips], ignore_index=True), particles, truth


def test_samples_of_a_hand_made_event() -> None:
    hits, cells, particles, truth = hand_made_event()
    s = event_samples(event_view(hits, cells, particles, truth))
    np.testing.assert_array_equal(np.sort(s["hits_per_particle"]), [1, 5])
    # A: one hit on 8/2, two on 8/4, one on 8/6 and 13/2; B: one on 8/6
    np.testing.assert_array_equal(np.sort(s["hits_per_layer_crossed"]), [1, 1, 1, 1, 2])
    assert s["noise_share"].mean() == pytest.approx(1 / 7)
    assert s["displaced_share"].mean() == pytest.approx(1 / 6)      # B's hit among 6
    np.testing.assert_allclose(s["displaced_log_r"], [np.log10(50.0)])
    np.testing.assert_allclose(s["vertex_z"], [0.0])                 # one primary vertex
    # A's truth graph: 1 -> {2, 3} -> 4 -> 5 (5 edges); all signal (pT 2 GeV, 5 hits)
    assert s["edge_dr"].size == 5 and s["signal_edge_dr"].size == 5
    np.testing.assert_allclose(np.sort(s["edge_dr"]),
                               np.sort([0.040, np.hypot(72.5, 1.0) / 1e3 - 0.032,
                                        0.044, 0.116 - np.hypot(72.5, 1.0) / 1e3, 0.384]),
                               atol=1e-6)
    np.testing.assert_allclose(s["edge_deta"], 0.0, atol=1e-6)      # all at z = 0
    np.testing.assert_array_equal(s["cells_per_cluster/vol8"], [2, 1])
    np.testing.assert_allclose(s["charge/vol8"], [0.3, 0.4])
    np.testing.assert_array_equal(s["cells_per_cluster/vol13"], [1])


def test_pixel_projection_keeps_truth_on_pixel_hits_only() -> None:
    hits, cells, particles, truth = hand_made_event()
    truth = truth[truth["hit_id"] != 6]                     # a pixel hit without truth
    view = event_view(hits, cells, particles, truth, volumes=(7, 8, 9))
    np.testing.assert_array_equal(view.truth_hit, [1, 1, 1, 1, 0, 0, 1])
    s = event_samples(view)
    np.testing.assert_array_equal(s["hits_per_particle"], [4])      # A's pixel hits
    assert s["edge_dr"].size == 4 and s["signal_edge_dr"].size == 4   # 1 -> {2,3} -> 4
    assert s["layer_hits"].size == 7                       # hit counts need no truth


@pytest.fixture(scope="module")
def simulated() -> dict[float, list]:
    """Two pile-up-60 events at each of two luminous regions."""
    out = {}
    for sigma_z in (5.5, 50.0):
        events = []
        for seed in (1, 2):
            rng = np.random.default_rng(seed)
            t = simulate_event(generate_particles(60.0, rng, sigma_z), rng)
            events.append(event_view(t["hits"], t["cells"], t["particles"], t["truth"]))
        out[sigma_z] = events
    return out


def test_subsample_keeps_whole_particles_and_the_noise_share(simulated) -> None:
    view = simulated[50.0][0]
    small = subsample(view, 100, 0.15, np.random.default_rng(0))
    assert len(small.particles) == 100
    kept = set(small.particles["particle_id"])
    pid = small.particle_id
    assert set(pid[pid != 0]) <= kept
    full_counts = pd.Series(view.particle_id[view.particle_id != 0]).value_counts()
    small_counts = pd.Series(pid[pid != 0]).value_counts()
    pd.testing.assert_series_equal(small_counts.sort_index(),
                                   full_counts[small_counts.index].sort_index())
    assert (pid == 0).mean() == pytest.approx(0.15, abs=0.01)
    assert set(small.cells["hit_id"]) <= set(small.hits["hit_id"])


def test_the_luminous_region_shows_in_vertex_z_and_edge_deta(simulated) -> None:
    narrow = [event_samples(v) for v in simulated[5.5]]
    wide = [event_samples(v) for v in simulated[50.0]]

    def distance(name: str, a: list, b: list) -> float:
        ha, hb, _ = compare(name, pool(a)[name], pool(b)[name])
        return tvd(ha, hb)

    for name in ("vertex_z", "edge_deta"):
        across = distance(name, narrow, wide)
        within = distance(name, narrow[:1], narrow[1:])
        assert across > 0.15 and across > 3 * within, name
    # what the vertex position does not change stays close
    assert distance("log_pt", narrow, wide) < 0.15


def test_luminous_region_of_several_events_keeps_their_vertices_apart() -> None:
    import sim_vs_real

    # vertex ids repeat from event to event: each event's vertices count on their own
    tables = [generate_particles(200.0, np.random.default_rng(seed), 50.0) for seed in (1, 2)]
    sigma = sim_vs_real.vertex_sigma_z(tables)
    assert abs(sigma["per_vertex_mm"] / 50.0 - 1) < 0.15
    assert sigma["n_vertices"] == sum(sim_vs_real.vertex_sigma_z([t])["n_vertices"]
                                      for t in tables)


@pytest.mark.slow
def test_benchmark_quick_run(trackml_dir: Path, tmp_path: Path) -> None:
    import sim_vs_real

    out = tmp_path / "out.json"
    assert sim_vs_real.main(["--quick", "--json", str(out), "--plots", str(tmp_path / "p"),
                             "--data", str(trackml_dir)]) == 0
    result = json.loads(out.read_text())
    assert result["max_tvd"] == max(result["tvd"].values())
    assert 0 < result["tvd"]["event21001/vertex_z"] < 1
    assert "sample/noise_share" not in result["tvd"]          # the twin is built to match it
    assert 0 < result["layer_count_max_rel_diff"]
    sigma = result["real"]["event21001"]["vertex_sigma_z"]["per_vertex_mm"]
    assert 40 < sigma < 65
    assert (tmp_path / "p" / "event21001_edge_deta.png").is_file()


def test_benchmark_bad_option_is_one_line(capsys) -> None:
    import sim_vs_real

    with pytest.raises(SystemExit) as exit_info:
        sim_vs_real.main(["--json", "x.json", "--vertex-sigma-z", "-3"])
    err = capsys.readouterr().err.strip()
    assert exit_info.value.code == 2 and "\n" not in err and "--vertex-sigma-z" in err


def test_tracks_are_scored_on_their_pixel_projection() -> None:
    from trkx.tracks.evaluate.metrics import overall_summary
    from trkx.tracks.evaluate.projection import (
        projected_evaluation,
        projected_record,
        projected_truth,
    )

    hits, particles, truth = hand_made_event_with_strips()
    a = int(particles["particle_id"][0])
    projected = projected_truth(hits, truth, particles, (7, 8, 9))
    assert set(projected["hit_id"]) == {1, 2, 3, 4, 6, 7}
    row = projected.set_index("hit_id").loc[2]
    assert (row["tx"], row["ty"], row["tz"]) == (72.0, 0.0, 0.0)    # the hit position
    record, mask = projected_record({"hits": hits, "particles": particles, "truth": truth},
                                    False, 1.0, (7, 8, 9), 5)
    np.testing.assert_array_equal(mask, hits["hit_id"].isin(projected["hit_id"]))
    assert int(record.signal_hit.sum()) == 4                       # A's 4 pixel hits
    # A's 4 pixel and 7 strip hits in one track: A is found on the projection, while the
    # whole track (strip hits count as noise there) has no majority
    labels = np.where(truth.set_index("hit_id")["particle_id"]
                      .reindex(hits["hit_id"]).to_numpy() == a, 1, 2)
    found = overall_summary([projected_evaluation(record, mask, labels, 5)])
    whole = overall_summary([projected_evaluation(record, np.ones(len(hits), bool), labels, 5)])
    assert found["n_signal_particles"] == whole["n_signal_particles"] == 1
    assert found["efficiency"] == 1.0 and whole["efficiency"] == 0.0
