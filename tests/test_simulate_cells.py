"""The simulator's cluster-shape model (trkx/data/simulate/cells.py): cluster width against the
crossing slope (Lorentz drift in the barrels, the endcap segment factor), no skipped cells, wide
noise clusters, and the per-volume shapes against the real sample event."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from trkx.data.detector import load_detector
from trkx.data.simulate import generate_particles, simulate_event
from trkx.data.simulate.cells import make_clusters

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))


@pytest.fixture(scope="module")
def detector():
    return load_detector()


def module_of(detector, volume: int) -> int:
    return int(np.flatnonzero(detector.volume_id == volume)[0])


def widths(detector, module: int, slope_u: float, slope_v: float, n: int = 4000,
           seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Columns, rows and cells of ``n`` clusters at random points near the module centre for
    the local direction ``(slope_u, slope_v, 1)``."""
    rng = np.random.default_rng(seed)
    modules = np.full(n, module)
    point = rng.uniform(-2.0, 2.0, (n, 2))
    direction = np.tile([slope_u, slope_v, 1.0], (n, 1))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    c = make_clusters(detector, modules, point, direction, rng)
    ch0_min = np.full(n, 1 << 30)
    ch0_max = np.full(n, -1)
    ch1_min = np.full(n, 1 << 30)
    ch1_max = np.full(n, -1)
    np.minimum.at(ch0_min, c.hit, c.ch0)
    np.maximum.at(ch0_max, c.hit, c.ch0)
    np.minimum.at(ch1_min, c.hit, c.ch1)
    np.maximum.at(ch1_max, c.hit, c.ch1)
    cols, rows = ch0_max - ch0_min + 1, ch1_max - ch1_min + 1
    return cols, rows, np.bincount(c.hit, minlength=n)


@pytest.mark.parametrize("volume", [8, 13, 17])
def test_barrel_width_is_smallest_at_the_lorentz_angle(detector, volume: int) -> None:
    m = module_of(detector, volume)
    t, pu = detector.thickness[m], detector.pitch_u[m]
    # the field is along local v in the barrels: the charge drifts by -0.11 per unit depth in u
    for slope in (-0.6, -0.2, 0.0, 0.11, 0.3, 0.8):
        cols, _, _ = widths(detector, m, slope, 0.0)
        expected = abs(slope - 0.11) * t / pu        # mean extra columns of a segment
        # (the samples sit at the centres of S equal pieces: the ends lose up to 1/8 pitch)
        assert abs((cols - 1).mean() - expected) < 0.05 + 0.15 * expected, slope
    at_drift = (widths(detector, m, 0.11, 0.0)[0] - 1).mean()
    assert at_drift < 0.02
    # symmetric slopes give different widths: the asymmetry the real barrels show
    assert (widths(detector, m, -0.3, 0.0)[0]).mean() > (widths(detector, m, 0.3, 0.0)[0]).mean()


@pytest.mark.parametrize("volume, factor", [(7, 2.4), (9, 2.4), (12, 1.7)])
def test_endcap_clusters_span_the_depth_factor_without_drift(detector, volume: int,
                                                             factor: float) -> None:
    m = module_of(detector, volume)
    t, pu, pv = detector.thickness[m], detector.pitch_u[m], detector.pitch_v[m]
    for slope in (0.1, 0.3):
        cols_p, rows_p, _ = widths(detector, m, slope, slope)
        cols_n, _, _ = widths(detector, m, -slope, slope)
        expected = factor * slope * t / pu
        assert abs((cols_p - 1).mean() - expected) < 0.05 + 0.15 * expected
        assert abs((cols_p - cols_n).mean()) < 0.05       # no Lorentz drift in the endcaps
        if pv < 1.0:
            expected = factor * slope * t / pv
            assert abs((rows_p - 1).mean() - expected) < 0.05 + 0.15 * expected
    # a track along the normal leaves one pixel
    cells = widths(detector, m, 0.0, 0.0)[2]
    assert (cells == 1).mean() > 0.99


def test_long_clusters_skip_no_cell(detector) -> None:
    m = module_of(detector, 8)
    slope_v = 25 * detector.pitch_v[m] / detector.thickness[m]       # 25 rows
    cols, rows, cells = widths(detector, m, 0.11, slope_v, n=500)
    assert np.all(cols == 1)
    assert np.all(cells == rows) and rows.mean() > 24.5


def test_noise_clusters_are_not_single_cells() -> None:
    rng = np.random.default_rng(5)
    event = simulate_event(generate_particles(20.0, rng, 50.0), rng)
    noise_ids = event["truth"].loc[event["truth"]["particle_id"] == 0, "hit_id"]
    hits = event["hits"].set_index("hit_id")
    counts = event["cells"].groupby("hit_id").size()
    barrel = noise_ids[hits.loc[noise_ids, "volume_id"].to_numpy() == 8]
    assert barrel.size > 20
    # real pixel-barrel noise: 1.3% single cells (sample event and event 21001)
    assert (counts.loc[barrel] == 1).mean() < 0.1
    assert counts.loc[noise_ids].mean() > 2.0


def test_pixel_shapes_match_the_real_sample_event(trackml_dir: Path, detector) -> None:
    import pandas as pd

    from trkx.realism.distributions import SHAPE_BINS, histogram, shape_samples, tvd

    prefix = trackml_dir / "sample_event" / "event000000001"
    hits = pd.read_csv(f"{prefix}-hits.csv.gz")
    truth = pd.read_csv(f"{prefix}-truth.csv.gz").set_index("hit_id")["particle_id"]
    real = shape_samples(hits, pd.read_csv(f"{prefix}-cells.csv.gz"), detector,
                         truth.reindex(hits["hit_id"]).to_numpy() != 0)
    rng = np.random.default_rng(7)
    event = simulate_event(generate_particles(100.0, rng, 50.0), rng)
    pid = event["truth"].set_index("hit_id")["particle_id"].reindex(event["hits"]["hit_id"])
    sim = shape_samples(event["hits"], event["cells"], detector, pid.to_numpy() != 0)
    for volume in (7, 8, 9):
        for feature in ("extent_u", "extent_v", "cell_count", "dir_eta"):
            distance = tvd(histogram(real[volume][feature], SHAPE_BINS[feature]),
                           histogram(sim[volume][feature], SHAPE_BINS[feature]))
            # before the Lorentz drift and endcap factor: 0.2-0.36 in the endcaps
            assert distance < 0.12, (volume, feature, distance)
