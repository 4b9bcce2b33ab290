"""The generator's fit to real particle tables: the displaced direction per |eta_x| bin, their pT
per production cell."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from trkx.data.particle_id import encode_particle_id
from trkx.data.simulate.spectra import (
    DISPLACED_R_EDGES,
    DISPLACED_Z_EDGES,
    ETA_X_BINS,
    MIN_CELL_ENTRIES,
    QUANTILE_LEVELS,
    direction_cell,
    displaced_cell,
    eta_x_bin,
    fit_spectra,
    format_fit,
    pt_bin,
    sample_binned_quantiles,
)


def _table(rng: np.random.Generator) -> pd.DataFrame:
    """Prompt particles, and displaced ones whose direction depends on where they are made:
    at |eta_x| ~ 0.5 they keep it (eta_p = eta_x + 0.2 s), at |eta_x| ~ 3.5 they turn central
    (eta_p = eta_x - 2 s), s = sign(eta_x), on both sides of the detector."""
    n = 400
    prompt = pd.DataFrame({"particle_id": encode_particle_id(1, np.arange(1, n + 1)),
                           "vx": 0.0, "vy": 0.0, "vz": rng.normal(0, 5, n),
                           "px": 1.0, "py": 0.0, "pz": rng.normal(0, 1, n),
                           "q": 1})
    eta_x = np.repeat([0.5, -0.5, 3.5, -3.5], n // 4)
    side = np.sign(eta_x)
    eta_p = eta_x + np.where(np.abs(eta_x) < 1, 0.2, -2.0) * side
    r = 50.0
    displaced = pd.DataFrame({"particle_id": encode_particle_id(1, 1, generation=1,
                                                                secondary_id=np.arange(1, n + 1)),
                              "vx": r, "vy": 0.0, "vz": r * np.sinh(eta_x),
                              "px": 1.0, "py": 0.0, "pz": np.sinh(eta_p), "q": -1})
    return pd.concat([prompt, displaced], ignore_index=True)


def test_the_displaced_direction_is_fitted_per_eta_x_bin() -> None:
    fit = fit_spectra([_table(np.random.default_rng(0))])
    tables = np.asarray(fit["displaced_deta_by_eta_x"])
    assert tables.shape[0] == len(ETA_X_BINS)
    np.testing.assert_allclose(np.median(tables[eta_x_bin(np.array([0.5]))[0]]), 0.2, atol=1e-6)
    np.testing.assert_allclose(np.median(tables[eta_x_bin(np.array([-3.5]))[0]]), -2.0, atol=1e-6)
    # the packaged JSON holds the float table (not rounded to integers) and the source
    parsed = json.loads(format_fit(fit, "test"))
    np.testing.assert_allclose(parsed["displaced_deta_by_eta_x"], tables, rtol=1e-5, atol=1e-6)
    assert parsed["source"] == "test" and parsed["n_events"] == fit["n_events"]


def test_binned_quantiles_draw_from_the_table_of_each_entry() -> None:
    tables = np.stack([np.zeros(105), np.full(105, 7.0), np.linspace(0, 1, 105)])
    which = np.array([1, 0, 1, 2, 0])
    values = sample_binned_quantiles(tables, which, np.random.default_rng(1))
    assert values[0] == 7.0 and values[2] == 7.0 and values[1] == 0.0 and values[4] == 0.0
    assert 0.0 <= values[3] <= 1.0
    np.testing.assert_array_equal(eta_x_bin(np.array([0.0, -0.99, 1.0, -3.7, 4.0, 9.0])),
                                  [0, 0, 1, 3, 4, 4])


def test_the_displaced_pt_is_fitted_per_production_cell() -> None:
    """Secondaries of 2 GeV made near the beam (r = 5 mm, z = 20 mm) and of 0.3 GeV far out
    (r = 500 mm, z = 1500 mm): each cell's table holds its own pT; a sparse cell (r = 5 mm,
    z = 1500 mm, fewer than MIN_CELL_ENTRIES) takes its r row's; the generator draws from the
    real fit's table of each particle's cell (its near-beam cell is the harder)."""
    n = MIN_CELL_ENTRIES + 50
    near = {"vx": 5.0, "vz": 20.0, "px": 2.0}
    far = {"vx": 500.0, "vz": 1500.0, "px": 0.3}
    frames = [pd.DataFrame({"particle_id": encode_particle_id(1, 1, generation=1,
                                                              secondary_id=np.arange(1, n + 1)),
                            "vx": where["vx"], "vy": 0.0, "vz": where["vz"], "px": where["px"],
                            "py": 0.0, "pz": 0.5, "q": 1}) for where in (near, far)]
    prompt = pd.DataFrame({"particle_id": encode_particle_id(1, np.arange(1, 11)), "vx": 0.0,
                           "vy": 0.0, "vz": 0.0, "px": 1.0, "py": 0.0, "pz": 0.0, "q": 1})
    sparse = frames[0].head(10).assign(vz=1500.0, px=7.0)
    fit = fit_spectra([pd.concat([prompt, *frames, sparse], ignore_index=True)])
    tables = np.asarray(fit["displaced_log_pt_by_position"])
    assert tables.shape[0] == len(DISPLACED_R_EDGES) * len(DISPLACED_Z_EDGES)
    cell_near, cell_far, cell_sparse = displaced_cell(np.array([5.0, 500.0, 5.0]),
                                                      np.array([20.0, -1500.0, 1500.0]))
    assert np.allclose(tables[cell_near], np.log10(2.0))
    assert np.allclose(tables[cell_far], np.log10(0.3))
    row = tables[cell_sparse]           # the r = 1-10 mm row: 250 at 2 GeV, 10 at 7 GeV
    assert row[0] == np.log10(2.0) and row[-1] == np.log10(7.0)

    from trkx.data.simulate.fitted_spectra import FIT
    real = np.asarray(FIT["displaced_log_pt_by_position"])
    above = 1.0 - np.array([np.interp(0.0, table, QUANTILE_LEVELS) for table in real])
    assert above[displaced_cell(np.array([5.0]), np.array([20.0]))[0]] > 2 * above[
        displaced_cell(np.array([500.0]), np.array([1500.0]))[0]]


def test_a_hard_secondary_flies_on_from_where_it_is_made() -> None:
    """The direction tables are fitted per pT bin: secondaries of 2 GeV made flying radially
    (phi_p = phi_x, eta_p = eta_x) and of 0.2 GeV made at 1.5 rad to it and 1 unit of eta
    inwards keep each their own table; the generator, with the real fit, sends its hard
    secondaries on from their production point (real: median |phi_p - phi_x| 0.05 rad above
    1 GeV) and its soft ones any way."""
    n = MIN_CELL_ENTRIES + 50
    rows = []
    for pt, dphi, deta in ((2.0, 0.0, 0.0), (0.2, 1.5, -1.0)):
        eta_x = np.full(n, 0.5)
        rows.append(pd.DataFrame({
            "particle_id": encode_particle_id(1, 1, generation=1,
                                              secondary_id=np.arange(1, n + 1)),
            "vx": 50.0, "vy": 0.0, "vz": 50.0 * np.sinh(eta_x),
            "px": pt * np.cos(dphi), "py": pt * np.sin(dphi), "pz": pt * np.sinh(eta_x + deta),
            "q": 1}))
    prompt = pd.DataFrame({"particle_id": encode_particle_id(1, np.arange(1, 11)), "vx": 0.0,
                           "vy": 0.0, "vz": 0.0, "px": 1.0, "py": 0.0, "pz": 0.0, "q": 1})
    fit = fit_spectra([pd.concat([prompt, *rows], ignore_index=True)])
    dphi = np.asarray(fit["displaced_dphi_by_pt"])
    deta = np.asarray(fit["displaced_deta_by_eta_x_pt"])
    hard, soft = pt_bin(np.array([2.0, 0.2]))
    assert np.allclose(dphi[hard], 0.0) and np.allclose(dphi[soft], 1.5)
    cells = direction_cell(np.array([0.5, 0.5]), np.array([2.0, 0.2]))
    assert np.allclose(deta[cells[0]], 0.0) and np.allclose(deta[cells[1]], -1.0, atol=1e-6)

    from trkx.data.simulate.particles import generate_particles
    table = generate_particles(200.0, np.random.default_rng(7))
    r = np.hypot(table.vx, table.vy)
    pt = np.hypot(table.px, table.py)
    turn = np.abs(np.angle(np.exp(1j * (np.arctan2(table.py, table.px)
                                        - np.arctan2(table.vy, table.vx)))))
    assert np.median(turn[(r > 1) & (pt > 1)]) < 0.15
    assert np.median(turn[(r > 1) & (pt < 0.3)]) > 0.8
