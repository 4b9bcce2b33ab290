"""Particle spectra fitted to real TrackML particle tables, and inverse-CDF sampling from them.

A fit summarises real events (``kaggle_particles``) by quantile tables (``QUANTILE_LEVELS``)
of the quantities the generator draws, separately for *prompt* particles (vertex radius < 1 mm)
and *displaced* ones:

* prompt: ``log10 pT``, ``eta``, charge share, vertex spread (``sigma_xy``, ``sigma_z`` of the
  vertex positions), particles per primary vertex, active vertices and prompt particles per
  event (per unit of the real mu = 200);
* displaced: ``log10 pT`` (over all, and per cell of the production point's ``r`` and ``|z|``,
  ``DISPLACED_R_EDGES`` x ``DISPLACED_Z_EDGES``: the real share above 1 GeV is 0.088 for
  ``r < 10 mm, |z| < 100 mm`` and 0.014-0.022 beyond ``r = 300 mm``; a cell of fewer than
  ``MIN_CELL_ENTRIES`` takes its ``r`` row's table, a row of fewer all of them), production
  point (``log10 r`` and ``z``, jointly as a 2-D histogram, because barrel and endcap material
  lie at different (r, z)), and the momentum direction
  relative to the production point: ``phi_p - phi_x``, and ``s (eta_p - eta_x)`` with
  ``s = sign(eta_x)`` in bins of ``|eta_x|`` (``ETA_X_BINS``), because it depends on where the
  particle is made (over the 18 Kaggle tables its median is -0.3 for ``|eta_x| < 1`` and -2.9
  for ``3 <= |eta_x| < 4``; one table for all would put 20% of the displaced particles beyond
  ``|eta| = 4``, where the real tables hold none); both also per pT bin
  (``DISPLACED_PT_EDGES``: ``displaced_dphi_by_pt``, ``displaced_deta_by_eta_x_pt``, a sparse
  cell taking its pT bin's table over every ``|eta_x|``), because a secondary above 0.5 GeV
  flies on from where it is made (real median ``|phi_p - phi_x|`` 0.05 rad above 1 GeV against
  1.1 rad below), and one table for every pT sent the simulated ones any way;
* the displaced-to-prompt ratio.

Sampling a quantile table ``q`` at uniform ``U``: ``x = interp(U, levels, q)`` (piecewise-linear
inverse CDF). Regenerate the packaged fit with
``python -m trkx.data.simulate.spectra DIR > trkx/data/resources/fitted_spectra.json``
(read by :mod:`trkx.data.simulate.fitted_spectra`).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

QUANTILE_LEVELS = np.concatenate([[0.0, 0.002, 0.005], np.linspace(0.01, 0.99, 99),
                                  [0.995, 0.998, 1.0]])
PROMPT_RADIUS = 1.0                      # mm
LOG_R_BINS = np.linspace(0.0, 3.05, 62)  # log10(mm)
Z_BINS = np.linspace(-3000.0, 3000.0, 121)
#: Lower edges of the |eta_x| bins of the displaced direction table (the last one is open).
ETA_X_BINS = np.array([0.0, 1.0, 2.0, 3.0, 4.0])
#: Lower edges (mm) of the production point's r and |z| cells of the displaced pT tables (the
#: last of each is open).
DISPLACED_R_EDGES = np.array([1.0, 10.0, 30.0, 100.0, 300.0])
DISPLACED_Z_EDGES = np.array([0.0, 100.0, 300.0, 1000.0])
#: A pT cell with fewer real particles than this takes its r row's table.
MIN_CELL_ENTRIES = 200
#: Lower edges (GeV) of the displaced particles' pT bins of their direction tables (the last
#: one is open): above ~0.5 GeV they are decay products and conversions that fly on from
#: where they are made (real median |phi_p - phi_x| 0.18 rad at 0.5-0.7 GeV, 0.03 above 2 GeV),
#: below it they go any way (1.4 rad below 0.2 GeV).
DISPLACED_PT_EDGES = np.array([0.0, 0.3, 0.5, 0.7, 1.0, 1.5, 2.0])


def sample_quantiles(table: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
    """Draw ``size`` values from a quantile table (piecewise-linear inverse CDF)."""
    return np.interp(rng.random(size), QUANTILE_LEVELS, np.asarray(table, dtype=np.float64))


def eta_x_bin(eta_x: np.ndarray) -> np.ndarray:
    """Index of the ``ETA_X_BINS`` bin of each ``|eta_x|``."""
    return np.clip(np.digitize(np.abs(eta_x), ETA_X_BINS) - 1, 0, len(ETA_X_BINS) - 1)


def pt_bin(pt: np.ndarray) -> np.ndarray:
    """Index of the ``DISPLACED_PT_EDGES`` bin of each pT (GeV)."""
    return np.clip(np.digitize(pt, DISPLACED_PT_EDGES) - 1, 0, len(DISPLACED_PT_EDGES) - 1)


def direction_cell(eta_x: np.ndarray, pt: np.ndarray) -> np.ndarray:
    """Index ``i_eta * len(DISPLACED_PT_EDGES) + i_pt`` of each displaced particle's ``eta_p -
    eta_x`` table (its ``|eta_x|`` bin, its pT bin)."""
    return eta_x_bin(eta_x) * len(DISPLACED_PT_EDGES) + pt_bin(pt)


def displaced_cell(r: np.ndarray, z: np.ndarray) -> np.ndarray:
    """Index ``i_r * len(DISPLACED_Z_EDGES) + i_z`` of each production point's pT cell."""
    i_r = np.clip(np.digitize(r, DISPLACED_R_EDGES) - 1, 0, len(DISPLACED_R_EDGES) - 1)
    i_z = np.clip(np.digitize(np.abs(z), DISPLACED_Z_EDGES) - 1, 0, len(DISPLACED_Z_EDGES) - 1)
    return i_r * len(DISPLACED_Z_EDGES) + i_z


def sample_binned_quantiles(tables: np.ndarray, which: np.ndarray,
                            rng: np.random.Generator) -> np.ndarray:
    """One value per entry of ``which``, drawn from the quantile table ``tables[which]`` (one
    uniform number per entry, as :func:`sample_quantiles`)."""
    uniform = rng.random(len(which))
    values = np.empty(len(which), dtype=np.float64)
    for index, table in enumerate(np.asarray(tables, dtype=np.float64)):
        mine = which == index
        values[mine] = np.interp(uniform[mine], QUANTILE_LEVELS, table)
    return values


def sample_histogram2d(counts: np.ndarray, x_edges: np.ndarray, y_edges: np.ndarray, size: int,
                       rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Draw points from a 2-D histogram (bin by its count, uniform inside the bin)."""
    flat = np.asarray(counts, dtype=np.float64).ravel()
    cells = rng.choice(flat.size, size=size, p=flat / flat.sum())
    ix, iy = np.divmod(cells, len(y_edges) - 1)
    x = x_edges[ix] + rng.random(size) * (x_edges[ix + 1] - x_edges[ix])
    y = y_edges[iy] + rng.random(size) * (y_edges[iy + 1] - y_edges[iy])
    return x, y


def _wrap(angle: np.ndarray) -> np.ndarray:
    return (angle + np.pi) % (2 * np.pi) - np.pi


def fit_spectra(tables: Sequence[pd.DataFrame]) -> dict[str, object]:
    """Fit the generator's tables to real particle tables (see module docstring)."""
    frame = pd.concat(list(tables), keys=range(len(tables)), names=["event", "row"])
    frame = frame.reset_index(level="event")
    pid = frame["particle_id"].to_numpy().astype(np.uint64)
    vertex = (pid >> np.uint64(52)).astype(np.int64)
    pt = np.hypot(frame["px"], frame["py"]).to_numpy()
    p = np.sqrt(pt ** 2 + frame["pz"].to_numpy() ** 2)
    eta = np.arctanh(frame["pz"].to_numpy() / p)
    vr = np.hypot(frame["vx"], frame["vy"]).to_numpy()
    vz = frame["vz"].to_numpy()
    prompt = vr < PROMPT_RADIUS
    q = QUANTILE_LEVELS
    per_vertex = frame[prompt].groupby([frame["event"][prompt], vertex[prompt]])
    vertex_z = per_vertex["vz"].mean().to_numpy()
    vertex_xy = np.concatenate([per_vertex["vx"].mean().to_numpy(),
                                per_vertex["vy"].mean().to_numpy()])
    multiplicity = per_vertex.size().to_numpy()
    active = per_vertex.size().groupby(level=0).size().to_numpy()
    d = ~prompt
    eta_x = np.arcsinh(vz[d] / vr[d])
    phi_x = np.arctan2(frame["vy"].to_numpy()[d], frame["vx"].to_numpy()[d])
    phi_p = np.arctan2(frame["py"].to_numpy()[d], frame["px"].to_numpy()[d])
    hist, _, _ = np.histogram2d(np.log10(vr[d]), vz[d], bins=[LOG_R_BINS, Z_BINS])
    charge = frame["q"].to_numpy()
    return {
        "n_events": len(tables),
        "prompt_log_pt": np.quantile(np.log10(pt[prompt]), q),
        "prompt_eta": np.quantile(eta[prompt], q),
        "prompt_positive_share": float((charge[prompt] > 0).mean()),
        "vertex_sigma_xy": float(np.std(vertex_xy)),
        "vertex_sigma_z": float(np.std(vertex_z)),
        "vertex_multiplicity": np.quantile(multiplicity, q),
        "active_vertices_per_mu": float(active.mean() / 200.0),
        "prompt_per_mu": float(prompt.sum() / len(tables) / 200.0),
        "displaced_per_prompt": float(d.sum() / prompt.sum()),
        "displaced_log_pt": np.quantile(np.log10(pt[d]), q),
        "displaced_log_pt_by_position": _position_quantiles(np.log10(pt[d]), vr[d], vz[d], q),
        "displaced_positive_share": float((charge[d] > 0).mean()),
        "displaced_position_hist": hist.astype(np.int64),
        "displaced_deta_by_eta_x": _binned_quantiles(
            np.where(eta_x < 0, -1.0, 1.0) * (eta[d] - eta_x), eta_x_bin(eta_x), q),
        "displaced_dphi": np.quantile(_wrap(phi_p - phi_x), q),
        "displaced_dphi_by_pt": _cell_quantiles(_wrap(phi_p - phi_x), pt_bin(pt[d]),
                                                len(DISPLACED_PT_EDGES), q),
        "displaced_deta_by_eta_x_pt": _cell_quantiles(
            np.where(eta_x < 0, -1.0, 1.0) * (eta[d] - eta_x), direction_cell(eta_x, pt[d]),
            len(ETA_X_BINS) * len(DISPLACED_PT_EDGES), q, fallback=pt_bin(pt[d])),
    }


def _cell_quantiles(values: np.ndarray, cell: np.ndarray, n_cells: int, q: np.ndarray,
                    fallback: np.ndarray | None = None) -> np.ndarray:
    """Quantiles of ``values`` per cell (0..n_cells-1); a cell of fewer than
    ``MIN_CELL_ENTRIES`` takes the values of its ``fallback`` group (the cell's pT bin: ``cell
    % len(DISPLACED_PT_EDGES)``), and when that is sparse too, all of them."""
    tables = []
    for index in range(n_cells):
        mine = cell == index
        if mine.sum() < MIN_CELL_ENTRIES and fallback is not None:
            mine = fallback == index % len(DISPLACED_PT_EDGES)
        if mine.sum() < MIN_CELL_ENTRIES:
            mine = np.ones(len(values), dtype=bool)
        tables.append(np.quantile(values[mine], q))
    return np.stack(tables)


def _position_quantiles(values: np.ndarray, r: np.ndarray, z: np.ndarray,
                        q: np.ndarray) -> np.ndarray:
    """Quantiles of ``values`` per :func:`displaced_cell` (a cell of fewer than
    ``MIN_CELL_ENTRIES``: its r row's; a row of fewer: all of them)."""
    cell = displaced_cell(r, z)
    row = cell // len(DISPLACED_Z_EDGES)
    tables = []
    for index in range(len(DISPLACED_R_EDGES) * len(DISPLACED_Z_EDGES)):
        mine = cell == index
        if mine.sum() < MIN_CELL_ENTRIES:
            mine = row == index // len(DISPLACED_Z_EDGES)
        if mine.sum() < MIN_CELL_ENTRIES:
            mine = np.ones(len(values), dtype=bool)
        tables.append(np.quantile(values[mine], q))
    return np.stack(tables)


def _binned_quantiles(values: np.ndarray, which: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Quantiles of ``values`` per ``ETA_X_BINS`` bin (a bin without entries: all of them)."""
    return np.stack([np.quantile(values[which == index] if (which == index).any() else values, q)
                     for index in range(len(ETA_X_BINS))])


def format_fit(fit: dict[str, object], source: str) -> str:
    """The fit as JSON text (the packaged ``trkx/data/resources/fitted_spectra.json``): one
    entry per line, ``source`` naming the tables, the tables' floats to 6 significant digits
    (single numbers in full), a 2-D table one row per line."""
    def number(x: float | int) -> str:
        return str(int(x)) if isinstance(x, (int, np.integer)) else f"{float(x):.6g}"

    def text(value: object) -> str:
        if isinstance(value, np.ndarray) and value.ndim == 2:
            return "[\n    " + ",\n    ".join(text(row) for row in value) + "]"
        if isinstance(value, np.ndarray):
            return "[" + ", ".join(number(x) for x in value.tolist()) + "]"
        if isinstance(value, (int, np.integer)):
            return str(int(value))
        return json.dumps(value if isinstance(value, str) else float(value))   # full precision

    entries = {"source": source, **fit}
    return "{\n" + ",\n".join(f"  {json.dumps(key)}: {text(value)}"
                                for key, value in entries.items()) + "\n}\n"


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m trkx.data.simulate.spectra KAGGLE_PARTICLES_DIR", file=sys.stderr)
        return 2
    from trkx.data.io import read_part

    files = sorted(Path(args[0]).glob("event*-particles.csv*"))
    tables = [read_part(f, "particles") for f in files]
    print(format_fit(fit_spectra(tables), f"{len(files)} files of {Path(args[0]).name}"), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
