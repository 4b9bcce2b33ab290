"""Track parameters against the truth: the fit's bias, widths and pulls by |eta|, per fit.

    python benchmarks/track_parameters.py --tracks OUT --events DIR [--json PATH]

``OUT`` is a ``trkx infer --out`` folder (its tracks files and the ``evaluate/`` matching:
``tracks.csv`` and ``particles.csv``); ``DIR`` the events with their particles files (event
21001's ``real_pixel_truth``: the matching is its pixel truth's). The hits of every track are
fitted again three ways, the builder's tracks unchanged:

- ``uniform``: the robust helix fit in 2 T (trkx.tracks.fit.helix_fit);
- ``field map``: the same in the solenoid's field (trkx.tracks.fit.field_map);
- ``calibrated``: the field map's fit, then the generalised least squares with the hits' pitches
  and the multiple scattering (trkx.tracks.fit.covariance): what the parameters files hold.

For the matched signal tracks, by |eta| 0-1 / 1-2 / 2-3 / 3-4: pT / pT - 1 (median, robust
width), and on the prompt ones (vertex within 1 mm of the beam) eta, phi, d0 and z0 widths;
with the calibrated errors, the widths of their pulls, and the median chi2 / ndf of its tracks
of >= 6 hits. Robust widths are 1.4826 MAD.
"""

from __future__ import annotations

if __name__ == "__main__":
    import harness
    harness.start()

from pathlib import Path

import harness
import numpy as np
import pandas as pd

from trkx.tracks.evaluate.resolution import ETA_BINS, MAD_TO_SIGMA
from trkx.tracks.fit.covariance import calibrated_fit
from trkx.tracks.fit.field_map import fit_in_field, fitted_hits


def _width(values: np.ndarray) -> float:
    values = np.asarray(values, np.float64)
    values = values[np.isfinite(values)]
    return float(MAD_TO_SIGMA * np.median(np.abs(values - np.median(values)))) if len(values) \
        else float("nan")


def event_rows(tracks_dir: Path, events_dir: Path, event_id: int) -> pd.DataFrame:
    """One row per matched signal track of the event: truth and the three fits."""
    name = f"event{event_id:09d}"
    tracks = pd.read_csv(tracks_dir / f"{name}-tracks.csv")
    hits = pd.read_csv(next(events_dir.glob(f"{name}-hits.csv*")))
    particles = pd.read_csv(next(events_dir.glob(f"{name}-particles.csv*")))
    hits = hits.merge(tracks[["hit_id", "track_id"]], on="hit_id", how="left")
    track_id = hits["track_id"].fillna(-1).to_numpy(np.int64)
    sizes = np.bincount(np.maximum(track_id, 0))
    track_id = np.where((track_id >= 0) & (sizes[np.maximum(track_id, 0)] >= 3), track_id, -1)
    x, y, z, volume = (hits[c].to_numpy() for c in ("x", "y", "z", "volume_id"))
    uniform = fit_in_field(track_id, x, y, z, volume, "uniform")
    field = fit_in_field(track_id, x, y, z, volume, "solenoid")
    calibrated = calibrated_fit(field, track_id, *fitted_hits(field, track_id, x, y, z), z,
                                volume, hits["layer_id"].to_numpy())
    frames = []
    for label, fit in (("uniform", uniform), ("field map", field), ("calibrated", calibrated)):
        frame = pd.DataFrame({"track_id": fit.track_id, "fit": label}).assign(
            **{c: getattr(fit, c) for c in ("pt", "eta", "phi", "d0", "z0")})
        for column in ("pt_err", "eta_err", "phi_err", "d0_err", "z0_err", "chi2_ndf"):
            frame[column] = getattr(calibrated, column) if label == "calibrated" else np.nan
        frames.append(frame.assign(n_hits=field.n_hits))
    fitted = pd.concat(frames).rename(columns={c: f"{c}_fit" for c in ("pt", "eta", "phi")})
    matched = pd.read_csv(tracks_dir / "evaluate" / "tracks.csv")
    matched = matched[matched["matched"].astype(bool) & (matched["event_id"] == event_id)]
    signal = pd.read_csv(tracks_dir / "evaluate" / "particles.csv")
    signal = signal[signal["signal"].astype(bool) & (signal["event_id"] == event_id)]
    rows = matched[["track_id", "particle_id"]].merge(
        signal[["particle_id", "pt", "eta"]], on="particle_id")
    truth = particles.assign(true_phi=np.arctan2(particles["py"], particles["px"]),
                             prompt=np.hypot(particles["vx"], particles["vy"]) <= 1.0)
    rows = rows.merge(truth[["particle_id", "vz", "true_phi", "prompt"]], on="particle_id")
    return rows.merge(fitted, on="track_id")


def summary(rows: pd.DataFrame) -> list[dict]:
    out = []
    for (fit, (low, high)) in ((f, b) for f in ("uniform", "field map", "calibrated")
                               for b in ETA_BINS):
        bin_rows = rows[(rows["fit"] == fit) & (rows["eta"].abs() >= low)
                        & (rows["eta"].abs() < high)]
        prompt = bin_rows[bin_rows["prompt"]]
        relative = bin_rows["pt_fit"] / bin_rows["pt"] - 1
        dphi = np.angle(np.exp(1j * (prompt["phi_fit"] - prompt["true_phi"])))
        figures = {"fit": fit, "abs_eta": f"{low:g}-{high:g}", "n_tracks": len(bin_rows),
                   "pt_bias": float(np.median(relative)) if len(relative) else float("nan"),
                   "pt_width": _width(relative), "eta_width": _width(prompt["eta_fit"]
                                                                     - prompt["eta"]),
                   "phi_width_mrad": 1e3 * _width(dphi), "d0_width_mm": _width(prompt["d0"]),
                   "z0_width_mm": _width(prompt["z0"] - prompt["vz"])}
        if fit == "calibrated":
            figures.update(
                pull_pt=_width((bin_rows["pt_fit"] - bin_rows["pt"]) / bin_rows["pt_err"]),
                pull_eta=_width((prompt["eta_fit"] - prompt["eta"]) / prompt["eta_err"]),
                pull_phi=_width(dphi / prompt["phi_err"]),
                pull_d0=_width(prompt["d0"] / prompt["d0_err"]),
                pull_z0=_width((prompt["z0"] - prompt["vz"]) / prompt["z0_err"]),
                chi2_ndf_median=float(np.median(bin_rows["chi2_ndf"][bin_rows["n_hits"] >= 6])))
        out.append(figures)
    return out


def main() -> None:
    parser = harness.parser(__doc__, events="the events, with their particles files")
    parser.add_argument("--tracks", type=Path, required=True, help="a `trkx infer --out` folder")
    args = harness.parse(parser)
    if args.events is None:
        parser.error("--events DIR is needed")
    event_ids = sorted(int(p.name[5:14]) for p in args.tracks.glob("event*-tracks.csv"))
    if not event_ids:
        parser.error(f"{args.tracks}: no eventNNNNNNNNN-tracks.csv")
    for name in ("tracks.csv", "particles.csv"):
        if not (args.tracks / "evaluate" / name).is_file():
            parser.error(f"{args.tracks / 'evaluate' / name}: missing (run `trkx infer` with "
                         "its evaluation: without --no-evaluate)")
    rows = pd.concat([event_rows(args.tracks, args.events, e) for e in event_ids])
    table = summary(rows)
    columns = ("fit", "abs_eta", "n_tracks", "pt_bias", "pt_width", "eta_width",
               "phi_width_mrad", "d0_width_mm", "z0_width_mm", "pull_pt", "pull_eta",
               "pull_phi", "pull_d0", "pull_z0", "chi2_ndf_median")
    print(" | ".join(columns))
    for figures in table:
        print(" | ".join(f"{figures[c]:.4g}" if isinstance(figures.get(c), float)
                         else str(figures.get(c, "")) for c in columns))
    harness.write_json(args.json, {"events": event_ids, "by_eta": table})


if __name__ == "__main__":
    main()
