"""The track builder's options from a tracks config section and a GNN checkpoint's working point.

A tracks config (``configs/tracks.yaml``) leaves the keys the GNN tuned null
(``walk_cut: null``, ...); :func:`builder_options` fills them from the working point the tuner
(trkx.tracks.tune.tuning) stored in the GNN checkpoint, with the track quality models that come
with its cuts, so that one rule meets a config and a trained set.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from trkx.files.checkpoint import with_working_point
from trkx.tracks.builder.building import TrackBuilder
from trkx.tracks.builder.second_pass import SECOND_PREFIX
from trkx.tracks.fit.quality import SHORT_FEATURES, SHORT_PREFIX, QualityModel

# Null builder keys that may stay null when no working point sets them (older checkpoints,
# or none given): TrackBuilder then applies min_length in every region.
OPTIONAL: frozenset[str] = frozenset({"min_length_forward", "short_score", "quality_cut",
                                      "extend_window_xy", "extend_window_z",
                                      "extend_overlap_xy", "extend_overlap_z",
                                      "extend_pixel_xy", "extend_pixel_z", "extend_rounds",
                                      "extend_weighted_z", "swap_chi2_ratio",
                                      "short_quality_cut", "second_cut",
                                      "second_quality_cut", "second_min_hits"})


def builder_options(options: Mapping[str, Any], working_point: Mapping[str, float] | None,
                    label: str = "builder") -> dict[str, Any]:
    """The builder section with its null (or absent) keys taken from the GNN's working point.

    ``working_point`` is a GNN checkpoint's (``walk_cut``, ``min_length``, ...); a null key it
    does not hold is an error naming the key, as is a null key without a working point; except
    the keys of :data:`OPTIONAL` (``min_length_forward``), which then stay null (one length
    everywhere, as checkpoints tuned before the forward length built), and ``stitch``: a
    working point tuned on stitched tracks (one that holds ``stitch``, or ``min_length_forward``
    from the tuner that introduced both) builds stitched tracks, an older one builds as it was
    tuned, without (so shipped models keep their tracks); no working point: stitched. A key of
    :data:`OPTIONAL` or ``stitch`` absent from ``options`` (a tracks config written before it)
    is taken from the working point the same way. A ``quality_cut`` comes with the working
    point's track quality model (``quality``; an error when it holds none), a
    ``short_quality_cut`` with its short-track model (``short_quality``). The extension's
    windows (``extend_window_xy``, ``extend_window_z``) are the working point's when it was
    tuned with them; a working point without them leaves the extension off (and
    ``extend_window_z`` at the builder's default); so are the windows of a layer's second hit
    (``extend_overlap_xy``, ``extend_overlap_z``: off without them) and the pixel hits' windows
    (``extend_pixel_xy``, ``extend_pixel_z``: the windows' without them) and the extension's
    rounds (``extend_rounds``: one without them) and its weighted lines
    (``extend_weighted_z``: off without them), and the second pass
    (``second_cut``, ``second_quality_cut`` with its model: off without them).
    """
    types = {f.name: f.type for f in fields(TrackBuilder)}
    out = dict(options)
    for key in (*OPTIONAL, "stitch"):
        out.setdefault(key, None)
    if out["stitch"] is None:
        tuned_stitched = working_point is None or "stitch" in working_point or \
            "min_length_forward" in working_point
        out["stitch"] = bool((working_point or {}).get("stitch", 1.0 if tuned_stitched else 0.0))
    nulls = [key for key, value in out.items() if value is None]
    where = ("the GNN checkpoint's working point has none" if working_point is not None
             else "give the GNN checkpoint (--checkpoint), whose working point sets it")
    try:                # an OPTIONAL key stays None: the builder applies min_length everywhere
        out = with_working_point(out, working_point, f"{where}; or set a value", OPTIONAL)
    except ValueError as exc:
        raise ValueError(f"{label}: {exc}") from None
    for key in nulls:
        if out[key] is not None:
            kind = str(types.get(key))
            out[key] = (bool(out[key]) if "bool" in kind else
                        round(out[key]) if "int" in kind else float(out[key]))
    for cut, name, prefix, features, words in (
            ("quality_cut", "quality", "quality_", None, "track quality"),
            ("short_quality_cut", "short_quality", SHORT_PREFIX, SHORT_FEATURES,
             "short-track quality"),
            ("second_quality_cut", "second_quality", SECOND_PREFIX, SHORT_FEATURES,
             "second-pass quality")):
        if out[cut] is None:            # each cut needs the model the tuner fitted with it
            continue
        model = QualityModel.from_working_point(working_point or {}, prefix,
                                                *(() if features is None else (features,)))
        if model is None:
            raise ValueError(f"{label}: {cut} is set but "
                             + (f"the GNN checkpoint's working point has no {words} model"
                                if working_point is not None else
                                f"no GNN checkpoint (--checkpoint) gives the {words} model")
                             + f"; set {cut}: null")
        out[name] = model
    for key in ("extend_window_z", "extend_overlap_z"):
        if out[key] is None:
            del out[key]
    return out
