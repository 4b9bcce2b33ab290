"""Resolution of the fitted track parameters against the truth of the matched particles.

For every matched candidate track of a signal particle, with its parameters (the
``eventNNNNNNNNN-parameters.csv`` rows, trkx.tracks.builder.parameters) and the particle's truth:

    pT:  r = pT_fit / pT_true - 1,   eta: eta_fit - eta_true,

and, when the particle table is known (``px, py, vz, q``) and the particle is prompt
(production radius <= trkx.data.truth.PROMPT_RADIUS), where the perigee is the vertex:

    phi: wrap(phi_fit - atan2(py, px)),   d0: d0_fit,   z0: z0_fit - vz,   charge: q_fit = q.

Each is summarised over the tracks with ``|eta_true| < max_eta`` by its median absolute value
and the robust width ``1.4826 MAD`` (the standard deviation of a normal core, blind to the
tails of wrong-hit tracks), the charge by the share of tracks that get it right. The pT is
also given by |eta| (:data:`ETA_BINS`, every track): its median (the bias) and robust width,
where the field's fall-off along the beam shows (trkx.tracks.fit.field_map), and, when the
parameters file has errors (trkx.tracks.fit.covariance), the widths of the pulls
``(fitted - true) / error`` of pT, eta and (prompt tracks) d0 and z0 by |eta|: 1 where the
errors are the parameters' spread.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from trkx.data.truth import PROMPT_RADIUS
from trkx.tracks.evaluate.metrics import EventEvaluation

MAD_TO_SIGMA = 1.4826
#: |eta| bins of the pT bias and width.
ETA_BINS: tuple[tuple[float, float], ...] = ((0.0, 1.0), (1.0, 2.0), (2.0, 3.0), (3.0, 4.0))


def matched_parameters(evaluation: EventEvaluation, parameters: pd.DataFrame,
                       particles: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per matched track of a signal particle: the fitted parameters (``*_fit``) and
    the particle's truth (``pt, eta, production_radius``; with ``particles``, the TrackML
    particle table, also ``phi, vz, q``)."""
    tracks = evaluation.tracks
    signal = evaluation.particles.set_index("particle_id")
    rows = tracks[tracks["matched"].to_numpy(bool)][["track_id", "particle_id"]]
    rows = rows[signal.reindex(rows["particle_id"])["signal"].fillna(False).to_numpy(bool)]
    fitted = parameters.set_index("track_id").add_suffix("_fit")
    out = rows.join(fitted, on="track_id", how="inner")
    truth = signal[["pt", "eta", "production_radius"]]
    out = out.join(truth, on="particle_id")
    if particles is not None:
        table = particles.set_index("particle_id")
        extra = pd.DataFrame({"phi": np.arctan2(table["py"], table["px"]), "vz": table["vz"],
                              "q": table["q"]}, index=table.index)
        out = out.join(extra, on="particle_id")
    return out.reset_index(drop=True)


def _widths(values: np.ndarray) -> dict[str, float]:
    values = values[np.isfinite(values)]
    if len(values) == 0:
        return {"median_abs": math.nan, "sigma": math.nan}
    median = np.median(values)
    return {"median_abs": float(np.median(np.abs(values))),
            "sigma": float(MAD_TO_SIGMA * np.median(np.abs(values - median)))}


def _bias_and_width(values: np.ndarray, low: float, high: float) -> dict[str, object]:
    values = values[np.isfinite(values)]
    median = float(np.median(values)) if len(values) else math.nan
    width = (float(MAD_TO_SIGMA * np.median(np.abs(values - median))) if len(values)
             else math.nan)
    return {"abs_eta": [low, high], "n_tracks": len(values), "median": median, "sigma": width}


def _pull_widths(rows: pd.DataFrame, low: float, high: float) -> dict[str, object]:
    """Robust widths of ``(fitted - true) / error`` for pT and eta (every track of the bin)
    and, on the prompt tracks, d0 and z0 (whose truth is the vertex)."""
    def width(values: np.ndarray) -> float:
        values = values[np.isfinite(values)]
        return (float(MAD_TO_SIGMA * np.median(np.abs(values - np.median(values))))
                if len(values) else math.nan)

    prompt = rows[rows["production_radius"].to_numpy() <= PROMPT_RADIUS]
    number = {column: rows[column].to_numpy(np.float64) for column in
              ("pt_fit", "pt", "pt_err_fit", "eta_fit", "eta", "eta_err_fit")}
    return {"abs_eta": [low, high], "n_tracks": len(rows),
            "pt": width((number["pt_fit"] - number["pt"]) / number["pt_err_fit"]),
            "eta": width((number["eta_fit"] - number["eta"]) / number["eta_err_fit"]),
            "d0": width((prompt["d0_fit"] / prompt["d0_err_fit"]).to_numpy(np.float64)),
            "z0": width(((prompt["z0_fit"] - prompt["vz"]) / prompt["z0_err_fit"])
                        .to_numpy(np.float64))}


def resolution_summary(rows: pd.DataFrame, max_eta: float = 2.0) -> dict[str, object]:
    """The module docstring's figures over ``rows`` (:func:`matched_parameters`)."""
    central = rows[np.abs(rows["eta"].to_numpy()) < max_eta]
    out: dict[str, object] = {"max_eta": max_eta, "n_tracks": len(central),
                              "pt_relative": _widths((central["pt_fit"] / central["pt"] - 1)
                                                     .to_numpy(np.float64)),
                              "eta": _widths((central["eta_fit"] - central["eta"])
                                             .to_numpy(np.float64))}
    relative = (rows["pt_fit"] / rows["pt"] - 1).to_numpy(np.float64)
    eta = np.abs(rows["eta"].to_numpy(np.float64))
    out["pt_by_eta"] = [_bias_and_width(relative[(eta >= lo) & (eta < hi)], lo, hi)
                        for lo, hi in ETA_BINS]
    if "pt_err_fit" in rows and "q" in rows:
        out["pulls_by_eta"] = [_pull_widths(rows[(eta >= lo) & (eta < hi)], lo, hi)
                               for lo, hi in ETA_BINS]
    if "q" in central:
        prompt = central[central["production_radius"].to_numpy() <= PROMPT_RADIUS]
        dphi = np.angle(np.exp(1j * (prompt["phi_fit"] - prompt["phi"]).to_numpy(np.float64)))
        out.update({"n_prompt_tracks": len(prompt), "phi": _widths(dphi),
                    "d0_mm": _widths(prompt["d0_fit"].to_numpy(np.float64)),
                    "z0_mm": _widths((prompt["z0_fit"] - prompt["vz"]).to_numpy(np.float64)),
                    "charge_correct": (float((prompt["charge_fit"] == prompt["q"]).mean())
                                       if len(prompt) else math.nan)})
    return out


def format_resolution(summary: dict) -> str:
    """One line per parameter for the terminal."""
    def line(name: str, key: str, unit: str = "") -> str:
        w = summary[key]
        return (f"  {name:<10s} median |res| {w['median_abs']:.4g}{unit}, "
                f"sigma {w['sigma']:.4g}{unit}")

    lines = [f"track parameters, {summary['n_tracks']:,d} matched signal tracks with |eta| < "
             f"{summary['max_eta']:g}:", line("pT / pT", "pt_relative"), line("eta", "eta")]
    if "phi" in summary:
        lines += [line("phi", "phi", " rad"), line("d0", "d0_mm", " mm"),
                  line("z0", "z0_mm", " mm"),
                  f"  charge     {summary['charge_correct']:.4f} right "
                  f"({summary['n_prompt_tracks']:,d} prompt tracks)"]
    if summary.get("pulls_by_eta"):
        lines.append("  pulls (width) by |eta|, pT / eta / d0 / z0: " + "; ".join(
            f"{b['abs_eta'][0]:g}-{b['abs_eta'][1]:g} {b['pt']:.2f} / {b['eta']:.2f} / "
            f"{b['d0']:.2f} / {b['z0']:.2f}" for b in summary["pulls_by_eta"] if b["n_tracks"]))
    if summary.get("pt_by_eta"):
        lines.append("  pT / pT by |eta| (median, sigma): " + "; ".join(
            f"{b['abs_eta'][0]:g}-{b['abs_eta'][1]:g} {b['median']:+.3f}, {b['sigma']:.3f}"
            for b in summary["pt_by_eta"] if b["n_tracks"]))
    return "\n".join(lines)
