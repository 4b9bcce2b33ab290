"""With the extension the tuner builds only a shortlist of its formula points exactly; under a
quality budget the shortlist must hold the points at the budget's floor, or the rule (the
fewest fakes within the budget of the plain choice) cannot take the point it would choose
among all of them."""

from __future__ import annotations

from trkx.tracks.tune.shortlist import choose as _choose
from trkx.tracks.tune.shortlist import exact_shortlist as _exact_choice


def _points() -> list[tuple]:
    """Two plain points, then 200 quality-cut points along one frontier (efficiency and fake
    rate both rising), as (cut, central, forward, efficiency, fake, short_score, quality_cut,
    short_quality_cut)."""
    plain = [(0.5, 5, 5, 0.90, 0.05, None, None, None),
             (0.5, 6, 6, 0.80, 0.02, None, None, None)]
    quality = [(i / 1000, 5, 5, 0.8501 + 0.0005 * i, 0.004 + 0.0003 * i, None, 0.5, None)
               for i in range(200)]
    return plain + quality


def test_the_budget_window_is_built_exactly():
    points = _points()
    built: list[tuple] = []

    def build(chosen: list[tuple]) -> list[tuple]:     # exact figures = the formulas'
        built.extend(chosen)
        return list(chosen)

    wanted = _choose(points, fake_target=0.05, quality_budget=0.002)
    assert wanted[3] >= 0.898 and wanted[3] < 0.8985     # the first point above the floor
    exact = _exact_choice(points, 4, 0.05, 0.002, build)
    assert wanted in exact
    assert _choose(exact, 0.05, 0.002) == wanted
    assert len(built) == len(set(built)) and len(built) < 30   # a shortlist, each built once


def test_the_window_follows_the_extension_when_it_moves_the_efficiencies():
    # the exact (extended) efficiency of every quality-cut point is 6 spacings below its
    # formula: the formula points nearest the floor then all build below it
    points = _points()

    def build(chosen: list[tuple]) -> list[tuple]:
        return [p[:3] + (p[3] - (0.003 if p[6] is not None else 0.0),) + p[4:] for p in chosen]

    wanted = _choose(build(points), fake_target=0.05, quality_budget=0.002)
    assert wanted[6] is not None and 0.898 <= wanted[3] < 0.8985
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
    # frontier in formula terms (the hits-only set's case, fifteenth session).
    plain = [(0.5, 5, 5, 0.90, 0.05, None, None, None),
             (0.5, 6, 6, 0.80, 0.02, None, None, None)]
    model = [(i / 1000, 5, 5, 0.8621 + 0.0005 * i, 0.004 + 0.0003 * i, None, None, 0.5)
             for i in range(200)]
    quality = [(i / 1000, 5, 5, 0.8501 + 0.0005 * i, 0.002 + 0.0003 * i, 0.95, 0.5, None)
               for i in range(200)]
    points = plain + model + quality

    def build(chosen: list[tuple]) -> list[tuple]:
        return [p[:3] + (p[3] - (0.01 if p[7] is not None else 0.0),) + p[4:] for p in chosen]

    wanted = _choose(build(points), fake_target=0.05, quality_budget=0.002)
    assert wanted[6] is not None and wanted[5] is not None
    exact = _exact_choice(points, 4, 0.05, 0.002, build)
    assert _choose(exact, 0.05, 0.002) == wanted


def test_each_cut_is_built_where_the_extension_moves_its_fake_rate_to_the_target():
    # Cut 0.9's formula fake rates are 3x what it builds (the extension joins its many pieces),
    # so its formula points lie far right of cut 0.6's on the frontier of all points; the
    # rule's exact choice is a cut-0.9 point near the fake target.
    low = [(0.6, 5, 5, 0.85 + 0.0004 * i, 0.002 + 0.0002 * i, None, None, None)
           for i in range(200)]
    high = [(0.9, 5, 5, 0.852 + 0.0004 * i, 0.006 + 0.0006 * i, None, None, None)
            for i in range(200)]
    points = low + high

    def build(chosen: list[tuple]) -> list[tuple]:
        return [p[:4] + (p[4] / 3 if p[0] == 0.9 else p[4],) + p[5:] for p in chosen]

    wanted = _choose(build(points), fake_target=0.015, quality_budget=None)
    assert wanted[0] == 0.9
    exact = _exact_choice(points, 8, 0.015, None, build)
    assert _choose(exact, 0.015, None) == wanted
    assert len(exact) < 60
