"""The track builder's working point, chosen on validation events: what ``trkx tune-tracks``
runs (the ``tune`` section of a tracks config is :class:`TrackTuning`).

From the builder of the config (its fixed keys: the walk, the stitching, the extension's
windows and rounds, the layer swap) the tuner chooses the walk cut, the lengths and the quality
cuts with their models (trkx.tracks.tune.tuning: the best efficiency at a fake rate <=
``fake_rate_target``), then, with ``second_fake_budget``, the second pass over the hits the
tuned builder leaves alone (trkx.tracks.tune.second_tuning). The result is a builder with every
key concrete, and its validation figures.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from trkx.tracks.builder.building import TrackBuilder
from trkx.tracks.builder.second_pass import with_second_pass
from trkx.tracks.evaluate.metrics import MetricCuts


@dataclass(frozen=True)
class TrackTuning:
    """How the working point is chosen.

    Args:
        fake_rate_target: the largest track fake rate (trkx's count) on the validation events.
        efficiency_count: the efficiency maximised: ``trkx`` (trkx's signal, the ``metrics``
            section) or ``anchors`` (each track's pixel projection, the published pipelines'
            signal: trkx.tracks.evaluate.anchors).
        quality_budget: with a value, the quality cut of lowest fake rate among the points that
            lose at most this much efficiency against the best point without one; None: tuned
            under ``fake_rate_target`` like the other keys.
        tune_points: with the extension, how many points are built exactly along each frontier
            (trkx.tracks.tune.shortlist), each one build of the validation events.
        second_fake_budget: with a value, the second pass is tuned too: the most signal
            particles added for at most this many fakes per first-pass track; None: no second
            pass.
    """

    fake_rate_target: float = 0.05
    efficiency_count: str = "trkx"
    quality_budget: float | None = None
    tune_points: int = 8
    second_fake_budget: float | None = None

    def __post_init__(self) -> None:
        from trkx.tracks.tune.tuning import EFFICIENCY_COUNTS

        if not 0.0 < self.fake_rate_target < 1.0:
            raise ValueError(f"fake_rate_target must lie in (0, 1), got {self.fake_rate_target}")
        if self.efficiency_count not in EFFICIENCY_COUNTS:
            raise ValueError(f"efficiency_count {self.efficiency_count!r}: expected one of "
                             f"{', '.join(EFFICIENCY_COUNTS)}")
        if self.quality_budget is not None and not 0.0 <= self.quality_budget < 1.0:
            raise ValueError(f"quality_budget must lie in [0, 1), got {self.quality_budget}")
        if self.tune_points < 2:
            raise ValueError(f"tune_points must be >= 2, got {self.tune_points}")
        if self.second_fake_budget is not None and not 0.0 <= self.second_fake_budget < 1.0:
            raise ValueError(f"second_fake_budget must lie in [0, 1), got "
                             f"{self.second_fake_budget}")


def tune_tracks(records: Sequence, base: TrackBuilder, tuning: TrackTuning,
                metric_cuts: MetricCuts | None = None) -> tuple[TrackBuilder, dict[str, float]]:
    """The builder ``base`` with its working point chosen on ``records`` (GNN-scored validation
    events with truth), and the validation figures of that point."""
    from trkx.tracks.tune.second_tuning import tune_second_pass
    from trkx.tracks.tune.tuning import tune_cut

    tuned = tune_cut(records, base, metric_cuts, fake_target=tuning.fake_rate_target,
                     quality_budget=tuning.quality_budget,
                     efficiency_count=tuning.efficiency_count,
                     extension_points=tuning.tune_points)
    builder = tuned.apply(base)
    figures = tuned.figures()
    if tuning.second_fake_budget is not None:
        second = tune_second_pass(records, builder, tuning.second_fake_budget, metric_cuts,
                                  efficiency_count=tuning.efficiency_count)
        builder = with_second_pass(builder, second)
        if second is not None:
            figures.update(second.figures())
    return builder, figures
