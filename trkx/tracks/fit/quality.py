"""Track quality: the probability that a candidate track is a real particle's, from its figures.

A built track ``t`` is described by the inputs ``f_t`` of :data:`FEATURES`, read off its row of
the track table (trkx.tracks.fit.track_table): length and layers, the GNN scores of its edges
(``logit`` of the mean and the lowest), the edges that leave it for another track (junctions),
and its helix fit's ``log pT`` and ``|eta|``. Its quality is a logistic regression,

    q_t = sigmoid(b + sum_k w_k (f_tk - m_k) / s_k),

fitted to the candidate tracks of validation events (label: the track is matched to a
particle) by iteratively reweighted least squares with an L2 penalty ``l2 |w|^2 / 2`` on the
standardised inputs (``m, s``: their mean and standard deviation): deterministic, no seed.
Left out on purpose: the helix fit's ``d0`` and ``z0``, so the score does not learn that a
track starts at the beam line (secondaries do not); and its residuals (chi2 / ndf, RMS), which
do not transfer from simulation to real events: on truth tracks (pT > 1 GeV, prompt, >= 5
hits) the real sample event's median transverse RMS is 0.14 mm, the simulated events' 0.028 mm
(docs/levers.md, "Track quality"). On the cells set's two validation events, fitting on one and
cutting at 0.5 on the other, they changed the fake rate by less than 0.002.

The model is ``3 F + 1`` numbers, kept in a JSON file of its own beside the tuned tracks
config (:meth:`QualityModel.as_dict`; trkx.tracks.stage_config); the builder dissolves the
candidate tracks with ``q_t < quality_cut`` (TrackBuilder).

The short tracks have a model of their own. A candidate shorter than the builder's minimum
length is nearly always a piece (on the cells set's validation events 391 of 6,256 candidates
of 3-6 hits are a signal particle's), and what tells the real ones apart is where they come
from: the short-track model reads :data:`SHORT_FEATURES`, the inputs above and the helix fit's
``log(|d0| + 1 um)`` (mm) and its pT clipped at 5 GeV (a piece of a particle below the signal
threshold is real but not wanted), and what it knows beyond its own fit (trkx.tracks.
short_inputs): the pT of its circle through the beam line (clipped at 5 GeV; a 3-hit arc's own
pT is loose) and ``log(1 + n)`` of the layers where its helix goes on into hits not its own,
ahead of it and behind it (a piece's particle goes on: at the same fakes
717 signal short tracks kept against 664 on the validation events, two-fold by event).
Fitted by the same regression to the candidates of 3 hits
up to the longest minimum length, those that find a signal particle against the fakes
(trkx.tracks.tune.tuning), kept in a file of its own; the builder keeps a
short candidate when its ``q_t >= short_quality_cut`` (docs/levers.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

FEATURES: tuple[str, ...] = ("n_hits", "n_layers", "layer_repeats", "logit_mean_score",
                             "logit_min_score", "leaving", "log_pt", "abs_eta")
#: The short-track model's inputs: FEATURES, where the track comes from and its pT, the
#: beam-line pT and the continuation.
SHORT_FEATURES: tuple[str, ...] = (*FEATURES, "log_abs_d0", "clipped_pt",
                                   "clipped_pt_beamline", "log_ahead", "log_behind")
_EPS = 1e-4
_D0_FLOOR_MM = 1e-3
_PT_CLIP_GEV = 5.0


def quality_inputs(table: pd.DataFrame, features: tuple[str, ...] = FEATURES) -> np.ndarray:
    """The ``[T, F]`` inputs ``features`` (of :data:`SHORT_FEATURES`) from a track table
    (finite everywhere)."""
    def logit(p: pd.Series) -> np.ndarray:
        p = np.clip(p.to_numpy(np.float64), _EPS, 1 - _EPS)
        return np.log(p / (1 - p))

    columns = {"n_hits": table["n_hits"].to_numpy(np.float64),
               "n_layers": table["n_layers"].to_numpy(np.float64),
               "layer_repeats": table["layer_repeats"].to_numpy(np.float64),
               "logit_mean_score": logit(table["mean_score"]),
               "logit_min_score": logit(table["min_score"]),
               "leaving": table["leaving"].to_numpy(np.float64),
               "log_pt": np.log(np.clip(table["pt"].to_numpy(np.float64), 0.01, 1e3)),
               "abs_eta": np.abs(table["eta"].to_numpy(np.float64))}
    if set(features) - set(FEATURES):     # the short-track model's own inputs
        columns["log_abs_d0"] = np.log(np.abs(table["d0"].to_numpy(np.float64)) + _D0_FLOOR_MM)
        columns["clipped_pt"] = np.clip(table["pt"].to_numpy(np.float64), 0.0, _PT_CLIP_GEV)
    if {"clipped_pt_beamline", "log_ahead", "log_behind"} & set(features):
        columns["clipped_pt_beamline"] = np.clip(table["pt_beamline"].to_numpy(np.float64), 0.0,
                                                 _PT_CLIP_GEV)
        columns["log_ahead"] = np.log1p(table["ahead"].to_numpy(np.float64))
        columns["log_behind"] = np.log1p(table["behind"].to_numpy(np.float64))
    return np.nan_to_num(np.stack([columns[name] for name in features], axis=1))


@dataclass(frozen=True)
class QualityModel:
    """``q = sigmoid(bias + weights . (f - mean) / scale)`` over ``features``."""

    mean: tuple[float, ...]
    scale: tuple[float, ...]
    weights: tuple[float, ...]
    bias: float
    features: tuple[str, ...] = FEATURES

    def score(self, table: pd.DataFrame) -> np.ndarray:
        """``q_t`` of every row of a track table."""
        z = (quality_inputs(table, self.features) - np.asarray(self.mean)) / np.asarray(
            self.scale)
        return 1.0 / (1.0 + np.exp(-(self.bias + z @ np.asarray(self.weights))))

    def as_dict(self) -> dict[str, Any]:
        """The model as its file holds it (JSON): ``features``, ``mean``, ``scale``,
        ``weights`` (one number per feature, in that order) and ``bias``."""
        return {"features": list(self.features), "mean": [float(v) for v in self.mean],
                "scale": [float(v) for v in self.scale],
                "weights": [float(v) for v in self.weights], "bias": float(self.bias)}

    @classmethod
    def from_dict(cls, values: Mapping[str, Any], label: str = "quality model") -> QualityModel:
        """The model of :meth:`as_dict`; a missing key, an unknown input or lists of unequal
        length are errors naming ``label`` (the file)."""
        missing = [k for k in ("features", "mean", "scale", "weights", "bias") if k not in values]
        if missing:
            raise ValueError(f"{label}: missing key {missing[0]!r}")
        features = tuple(str(name) for name in values["features"])
        unknown = [name for name in features if name not in SHORT_FEATURES]
        if unknown:
            raise ValueError(f"{label}: unknown input {unknown[0]!r} (known: "
                             f"{', '.join(SHORT_FEATURES)})")
        columns = {key: tuple(float(v) for v in values[key])
                   for key in ("mean", "scale", "weights")}
        wrong = [key for key, column in columns.items() if len(column) != len(features)]
        if wrong:
            raise ValueError(f"{label}: {wrong[0]} has {len(columns[wrong[0]])} numbers for "
                             f"{len(features)} inputs")
        return cls(columns["mean"], columns["scale"], columns["weights"],
                   float(values["bias"]), features)


def fit_quality(table: pd.DataFrame, matched: np.ndarray, l2: float = 1.0,
                iterations: int = 25, features: tuple[str, ...] = FEATURES) -> QualityModel:
    """The logistic regression of ``matched`` on the track table's inputs ``features``
    (module docstring), by Newton's method (IRLS) from zero weights."""
    inputs = quality_inputs(table, features)
    y = np.asarray(matched, dtype=np.float64)
    if len(y) == 0 or y.min() == y.max():
        raise ValueError("fitting the track quality needs both matched and fake tracks")
    mean = inputs.mean(axis=0)
    scale = inputs.std(axis=0)
    scale = np.where(scale > 1e-9, scale, 1.0)
    z = np.hstack([np.ones((len(y), 1)), (inputs - mean) / scale])
    beta = np.zeros(z.shape[1])
    penalty = np.full(z.shape[1], l2)
    penalty[0] = 0.0                       # the bias is not penalised
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-(z @ beta)))
        gradient = z.T @ (p - y) + penalty * beta
        hessian = (z * (p * (1 - p))[:, None]).T @ z + np.diag(penalty + 1e-9)
        step = np.linalg.solve(hessian, gradient)
        beta -= step
        if np.abs(step).max() < 1e-8:
            break
    return QualityModel(tuple(mean.tolist()), tuple(scale.tolist()), tuple(beta[1:].tolist()),
                        float(beta[0]), tuple(features))
