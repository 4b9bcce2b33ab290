"""With the extension the tuner builds only a shortlist of its formula points exactly; under a
quality budget the shortlist must hold the points at the budget's floor, or the rule (the
fewest fakes within the budget of the plain choice) cannot take the point it would choose
among all of them."""

from __future__ import annotations

from trkx.tracks.tune.shortlist import TrackPoint
from trkx.tracks.tune.shortlist import choose as _choose
from trkx.tracks.tune.shortlist import exact_shortlist as _exact_choice

P = TrackPoint


def _points() -> list[TrackPoint]:
    """Two plain points, then 200 quality-cut points along one frontier (efficiency and fake
    rate both rising)."""
    plain = [P(0.5, 5, 5, 0.90, 0.05), P(0.5, 6, 6, 0.80, 0.02)]
    quality = [P(i / 1000, 5, 5, 0.8501 + 0.0005 * i, 0.004 + 0.0003 * i, quality_cut=0.5)
               for i in range(200)]
    return plain + quality


def test_the_budget_window_is_built_exactly():
    points = _points()
    built: list[TrackPoint] = []

    def build(chosen: list[TrackPoint]) -> list[TrackPoint]:   # exact = the formulas'
        built.extend(chosen)
        return list(chosen)

    wanted = _choose(points, fake_target=0.05, quality_budget=0.002)
    assert 0.898 <= wanted.efficiency < 0.8985     # the first point above the floor
    exact = _exact_choice(points, 4, 0.05, 0.002, build)
    assert wanted in exact
    assert _choose(exact, 0.05, 0.002) == wanted
    assert len(built) == len(set(built)) and len(built) < 30   # a shortlist, each built once


def test_the_window_follows_the_extension_when_it_moves_the_efficiencies():
    # the exact (extended) efficiency of every quality-cut point is 6 spacings below its
    # formula: the formula points nearest the floor then all build below it
    points = _points()

    def build(chosen: list[TrackPoint]) -> list[TrackPoint]:
        return [p._replace(efficiency=p.efficiency - (0.003 if p.quality_cut is not None
                                                      else 0.0)) for p in chosen]

    wanted = _choose(build(points), fake_target=0.05, quality_budget=0.002)
    assert wanted.quality_cut is not None and 0.898 <= wanted.efficiency < 0.8985
    exact = _exact_choice(points, 4, 0.05, 0.002, build)
    assert _choose(exact, 0.05, 0.002) == wanted


def test_without_a_budget_the_shortlist_finds_the_best_point():
    points = _points()
    wanted = _choose(points, fake_target=0.03, quality_budget=None)
    exact = _exact_choice(points, 4, 0.03, None, list)
    assert _choose(exact, 0.03, None) == wanted


def test_each_family_gets_its_own_window_at_the_floor():
    # The formula frontier near the floor is all short-track-model points (1.2 points of
    # efficiency above the short-score-and-quality ones at their fake rate), but they build
    # 0.01 lower; the rule's exact choice is a short-score-and-quality point, below that
    # frontier in formula terms (as the hits-only set's tuner met it).
    plain = [P(0.5, 5, 5, 0.90, 0.05), P(0.5, 6, 6, 0.80, 0.02)]
    model = [P(i / 1000, 5, 5, 0.8621 + 0.0005 * i, 0.004 + 0.0003 * i, short_quality_cut=0.5)
             for i in range(200)]
    quality = [P(i / 1000, 5, 5, 0.8501 + 0.0005 * i, 0.002 + 0.0003 * i, 0.95, 0.5)
               for i in range(200)]
    points = plain + model + quality

    def build(chosen: list[TrackPoint]) -> list[TrackPoint]:
        return [p._replace(efficiency=p.efficiency - (0.01 if p.short_quality_cut is not None
                                                      else 0.0)) for p in chosen]

    wanted = _choose(build(points), fake_target=0.05, quality_budget=0.002)
    assert wanted.quality_cut is not None and wanted.short_score is not None
    exact = _exact_choice(points, 4, 0.05, 0.002, build)
    assert _choose(exact, 0.05, 0.002) == wanted


def test_each_cut_is_built_where_the_extension_moves_its_fake_rate_to_the_target():
    # Cut 0.9's formula fake rates are 3x what it builds (the extension joins its many pieces),
    # so its formula points lie far right of cut 0.6's on the frontier of all points; the
    # rule's exact choice is a cut-0.9 point near the fake target.
    low = [P(0.6, 5, 5, 0.85 + 0.0004 * i, 0.002 + 0.0002 * i) for i in range(200)]
    high = [P(0.9, 5, 5, 0.852 + 0.0004 * i, 0.006 + 0.0006 * i) for i in range(200)]
    points = low + high

    def build(chosen: list[TrackPoint]) -> list[TrackPoint]:
        return [p._replace(fake_rate=p.fake_rate / 3 if p.cut == 0.9 else p.fake_rate)
                for p in chosen]

    wanted = _choose(build(points), fake_target=0.015, quality_budget=None)
    assert wanted.cut == 0.9
    exact = _exact_choice(points, 8, 0.015, None, build)
    assert _choose(exact, 0.015, None) == wanted
    assert len(exact) < 60
