"""trkx's tracks counted as the published pipelines count theirs (the anchors' own definitions).

The pipelines trkx is compared with (HEPTv2, ACORN's GNN, object condensation) report on
TrackML's pixel detector alone, with HEPTv2's evaluation:

- the event is the pixel part: the hits of volumes :data:`PIXEL_VOLUMES` (7, 8, 9), and each
  track is projected onto its pixel hits;
- signal: ``pT > 0.9 GeV``, ``|eta| < 4``, hits on ``>= 3`` distinct pixel layers
  (:data:`ANCHOR_CUTS`; trkx's own signal is ``pT >= 1 GeV`` and ``>= 3`` hits anywhere);
- efficiency: signal particles matched by a candidate (``>= 3`` hits) with double majority;
- fake rate: unmatched candidates whose majority particle is a signal particle, over the
  candidates whose majority particle is a signal particle (``fake_rate_signal_majority`` of
  trkx.tracks.evaluate.metrics: the pieces of low-pT particles and the noise-majority candidates
  that
  trkx's own fake rate counts are left out).

An event whose truth covers its pixel hits only (the real event 21001) is already its pixel
part. ``pT > 0.9`` is taken as ``pT >= 0.9`` (no particle has exactly 0.9 GeV). The pooled
figures of several events are trkx.tracks.evaluate.metrics.overall_summary's, the anchors' fake rate
its ``fake_rate_signal_majority``.
"""

from __future__ import annotations

from dataclasses import replace
from weakref import WeakKeyDictionary

import numpy as np
import pandas as pd

from trkx.data.detector import PIXEL_VOLUMES
from trkx.tracks.evaluate.event_truth import EventTruth
from trkx.tracks.evaluate.metrics import EventEvaluation, MetricCuts, evaluate_event

#: HEPTv2's signal and candidates, double majority.
ANCHOR_CUTS = MetricCuts(pt_min=0.9, max_eta=4.0, min_hits=3, min_track_hits=3,
                         matching="double_majority", min_layers=3)


def pixel_hits(truth: EventTruth) -> np.ndarray:
    """Mask of the hits of ``truth`` in the pixel volumes (layer key ``volume * 1000 +
    layer``, trkx.data.truth.layer_key); every hit when the layers are unknown."""
    if (truth.layer < 0).all():
        return np.ones(len(truth), dtype=bool)
    return np.isin(truth.layer // 1000, PIXEL_VOLUMES)


#: Each truth's pixel part, made once while the truth lives (a tuner counts the same events
#: at many working points; the part keeps its own per-particle table, EventTruth.particles).
_PIXEL_PARTS: WeakKeyDictionary[EventTruth, EventTruth] = WeakKeyDictionary()


def pixel_part(truth: EventTruth) -> EventTruth:
    """The truth of the hits of ``truth`` in the pixel volumes (:func:`pixel_hits`), each
    particle's ``nhits`` counted there (its pixel hits: what the anchors' splits by hit count
    mean; the signal's ``>= 3`` pixel layers already imply ``>= 3`` pixel hits)."""
    part = _PIXEL_PARTS.get(truth)
    if part is None:
        part = truth.subset(pixel_hits(truth))
        _, inverse, counts = np.unique(part.particle_id, return_inverse=True,
                                       return_counts=True)
        nhits = np.where(part.particle_id != 0, counts[inverse], 0).astype(np.int64)
        part = _PIXEL_PARTS[truth] = replace(part, nhits=nhits)
    return part


def anchor_evaluation(truth: EventTruth, submission: pd.DataFrame) -> EventEvaluation:
    """The evaluation of ``submission`` (``hit_id, track_id``) on the pixel part of the event
    with :data:`ANCHOR_CUTS`."""
    pixel = pixel_part(truth)
    tracks = submission[submission["hit_id"].isin(pixel.hit_id)]
    return evaluate_event(pixel, tracks, ANCHOR_CUTS)
