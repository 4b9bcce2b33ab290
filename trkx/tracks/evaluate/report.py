"""The files of an evaluation (trkx.tracks.evaluate.evaluation) in an output folder:
``metrics.json``,
``particles.csv``, ``tracks.csv``, ``parameters.csv`` (with fitted parameters) and the PNG
plots (efficiency vs pT, eta, the particle's hit count, production radius and vertex |z|; fake
and duplicate rate vs eta; track length; pT resolution). Every file is written atomically."""

from __future__ import annotations

import json
import math
from pathlib import Path

from trkx.tracks.evaluate.evaluation import TrackEvaluation
from trkx.tracks.files import atomic_write


def json_safe(value):
    """NaN -> null, numpy scalars -> Python numbers, recursively."""
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _figures(evaluation: TrackEvaluation) -> dict:
    from trkx.tracks.evaluate.plots import rate_figure, resolution_figure, track_length_figure

    cuts, rates = evaluation.cuts, evaluation.rates
    signal = f"pT >= {cuts.pt_min:g} GeV, >= {cuts.min_hits} hits" + (
        f", |eta| <= {cuts.max_eta:g}" if cuts.max_eta is not None else "")
    match = f"{cuts.matching.replace('_', ' ')} matching"
    tracks_note = f"tracks with >= {cuts.min_track_hits} hits\n{match}"
    figures = {
        "efficiency_vs_pt": rate_figure(
            rates["efficiency_vs_pt"], r"particle $p_T$ [GeV]", "tracking efficiency",
            "Efficiency vs $p_T$", log_x=True,
            note=f"particles with >= {cuts.min_hits} hits\n{match}"),
        "efficiency_vs_eta": rate_figure(
            rates["efficiency_vs_eta"], r"particle $\eta$", "tracking efficiency",
            r"Efficiency vs $\eta$", note=f"signal: {signal}\n{match}"),
        "efficiency_vs_particle_hits": rate_figure(
            rates["efficiency_vs_particle_hits"], "hits of the particle", "tracking efficiency",
            "Efficiency vs particle hits", note=f"signal: {signal}\n{match}"),
        "fake_rate_vs_eta": rate_figure(
            rates["fake_rate_vs_eta"], r"track $\eta$ (mean of hits)", "fake rate",
            r"Fake rate vs $\eta$", ylim=None, note=tracks_note),
        "duplicate_rate_vs_eta": rate_figure(
            rates["duplicate_rate_vs_eta"], r"track $\eta$ (mean of hits)", "duplicate rate",
            r"Duplicate rate vs $\eta$", ylim=None, note=f"matched {tracks_note}"),
        "track_length": track_length_figure(evaluation.tracks, evaluation.particles),
    }
    if "efficiency_vs_production_radius" in rates:
        figures["efficiency_vs_production_radius"] = rate_figure(
            rates["efficiency_vs_production_radius"], "particle production radius [mm]",
            "tracking efficiency", "Efficiency vs production radius", log_x=True,
            note=f"signal: {signal}\nfirst bin: prompt (<= 1 mm)\n{match}")
    if "efficiency_vs_vertex_z" in rates:
        figures["efficiency_vs_vertex_z"] = rate_figure(
            rates["efficiency_vs_vertex_z"], "particle vertex |z| [mm]", "tracking efficiency",
            "Efficiency vs vertex |z|", note=f"signal: {signal}\n{match}")
    if evaluation.fitted is not None:
        figures["pt_resolution"] = resolution_figure(evaluation.fitted)
    return figures


def write_evaluation(evaluation: TrackEvaluation, out: Path, plots: bool = True) -> list[Path]:
    """Write the evaluation's files into ``out`` (the PNG plots only with ``plots``); the paths
    written."""
    text = json.dumps(json_safe(evaluation.report), indent=2)
    written = [atomic_write(out / "metrics.json", lambda tmp: tmp.write_text(text)),
               atomic_write(out / "particles.csv",
                            lambda tmp: evaluation.particles.to_csv(tmp, index=False)),
               atomic_write(out / "tracks.csv",
                            lambda tmp: evaluation.tracks.to_csv(tmp, index=False))]
    if evaluation.fitted is not None:
        written.append(atomic_write(out / "parameters.csv",
                                    lambda tmp: evaluation.fitted.to_csv(tmp, index=False)))
    for name, figure in (_figures(evaluation) if plots else {}).items():
        written.append(atomic_write(out / f"{name}.png",
                                    lambda tmp, f=figure: f.savefig(tmp, format="png", dpi=110)))
    return written
