"""The generator's fit to real particle tables: the displaced direction per |eta_x| bin."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from trkx.data.particle_id import encode_particle_id
from trkx.data.simulate.spectra import (
    ETA_X_BINS,
    eta_x_bin,
    fit_spectra,
    format_fit,
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
