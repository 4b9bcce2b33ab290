"""The tuner's rule over working points, and the shortlist it builds exactly.

A point is a :class:`TrackPoint` (trkx.tracks.tune.tuning scores them). The rule
(:func:`choose`): the best efficiency at the fake target among the plain points (no quality
cut, no short-track model), then with a ``quality_budget`` the point of fewest fakes among
all points whose efficiency is at least

    floor = efficiency(plain choice) - quality_budget.

With the builder's extension the figures of a point are known exactly only by building it, so
the tuner builds a shortlist (:func:`exact_shortlist`) and applies the rule to it. The
extension moves each family of points (plain; short score; short score with a quality cut;
short-track model) by its own amount, so the window at the floor is taken on each family's
own frontier: the formula frontier of all points near the floor may hold one family only,
whose points all build below it, while another family's points build above it. It also moves
each cut's fake rates by its own amount, so each cut's frontier is probed and then built where
its moved fake rates meet the target.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np


class TrackPoint(NamedTuple):
    """A working point of the track builder and its validation figures: the walk (or
    components) ``cut``, the minimum lengths in the ``central`` and ``forward`` regions
    (None: the central one everywhere), the gates of the short tracks and the quality cut
    (None: off), and the ``efficiency`` and ``fake_rate`` they give."""

    cut: float
    central: int
    forward: int | None
    efficiency: float
    fake_rate: float
    short_score: float | None = None
    quality_cut: float | None = None
    short_quality_cut: float | None = None



def is_plain(point: TrackPoint) -> bool:
    """True for a point without a quality cut or a short-track model."""
    return point.quality_cut is None and point.short_quality_cut is None


def family(point: TrackPoint) -> tuple[bool, bool, bool]:
    """Which gates a point uses: (short score, quality cut, short-track model)."""
    return (point.short_score is not None, point.quality_cut is not None,
            point.short_quality_cut is not None)


def best_point(points: list[TrackPoint], fake_target: float) -> TrackPoint:
    """The point of best efficiency at the fake target, or of the lowest fake rate when none
    meets it."""
    meeting = [p for p in points if p.fake_rate <= fake_target]
    if meeting:    # ties: higher cut, looser (or no) quality cut, shorter lengths, stricter
        # (or no) short-track score, no short-track model, then a stricter one
        return max(meeting, key=lambda p: (
            p.efficiency, p.cut, -(0.0 if p.quality_cut is None else p.quality_cut + 1e-9),
            -p.central, -(p.forward or 0), 2.0 if p.short_score is None else p.short_score,
            2.0 if p.short_quality_cut is None else p.short_quality_cut))
    return min(points, key=lambda p: (p.fake_rate, -p.efficiency))


def choose(points: list[TrackPoint], fake_target: float,
           quality_budget: float | None) -> TrackPoint:
    """The tuner's rule (module docstring) over ``points``."""
    best = best_point([p for p in points if is_plain(p) or quality_budget is None], fake_target)
    if quality_budget is not None:
        within = [p for p in points if p.efficiency >= best.efficiency - quality_budget - 1e-12]
        best = min(within, key=lambda p: (p.fake_rate, -p.efficiency, -p.cut, p.central,
                                          p.forward or 0,
                                          -(2.0 if p.short_score is None else p.short_score)))
    return best


def frontier(points: list[TrackPoint]) -> list[TrackPoint]:
    """The points no other point beats in both efficiency and fake rate, by efficiency."""
    front, best = [], -1.0
    for point in sorted(points, key=lambda p: (p.fake_rate, -p.efficiency)):
        if point.efficiency > best:
            front.append(point)
            best = point.efficiency
    return front


def spread(front: list[TrackPoint], size: int) -> list[TrackPoint]:
    """``size`` points of ``front`` evenly spread along it (its ends among them)."""
    if len(front) <= size:
        return list(front)
    return [front[i] for i in np.unique(np.linspace(0, len(front) - 1, size).round().astype(int))]


def _exact_fake(point: TrackPoint, probe: list[TrackPoint],
                exact: dict[TrackPoint, TrackPoint]) -> float:
    """``point``'s fake rate as the extension would move it: interpolated in the formula fake
    rates of the built ``probe`` points of its cut (their exact fake rates)."""
    pairs = sorted((p.fake_rate, exact[p].fake_rate) for p in probe)
    return float(np.interp(point.fake_rate, [a for a, _ in pairs], [b for _, b in pairs]))


def _cut_reach(front: list[TrackPoint], probe: list[TrackPoint],
               exact: dict[TrackPoint, TrackPoint],
               fake_target: float) -> float:
    """The best efficiency a cut's frontier may build at the fake target: its points whose
    moved fake rate (:func:`_exact_fake`) meets the target, their efficiencies moved by the
    probe's largest (exact - formula) efficiency; -inf when none meets it."""
    lift = max(exact[p].efficiency - p.efficiency for p in probe)
    meeting = [p.efficiency for p in front if _exact_fake(p, probe, exact) <= fake_target]
    return max(meeting) + lift if meeting else float("-inf")


def _reached(exact: dict[TrackPoint, TrackPoint], fake_target: float) -> float:
    """The best exact efficiency built so far at the fake target (-inf: none yet)."""
    meeting = [q.efficiency for q in exact.values() if q.fake_rate <= fake_target]
    return max(meeting) if meeting else float("-inf")


def _nearest(front: list[TrackPoint], figure: str, value: float,
             size: int) -> list[TrackPoint]:
    """The ``size`` points of ``front`` whose ``figure`` (efficiency or fake_rate) is
    nearest ``value`` (ties: fewer fakes)."""
    return sorted(front, key=lambda p: (abs(getattr(p, figure) - value), p.fake_rate))[:size]


def exact_shortlist(points: list[TrackPoint], size: int, fake_target: float,
                    quality_budget: float | None,
                    build: Callable[[list[TrackPoint]], list[TrackPoint]]) -> list[TrackPoint]:
    """The points built exactly (``build``: formula points -> exact points) on the way to the
    rule's choice:

    1. ``size`` points spread along each frontier (every point's, and the plain points' when
       the rule chooses among them first), and the ``size`` points of the (plain) frontier
       nearest the fake target; then on each cut's own frontier (of the points the rule
       chooses among first) ``size / 2`` points spread along it, and the ``size / 2`` whose
       fake rates, moved as the extension moved those (:func:`_exact_fake`), are nearest the
       target (the cuts from the highest down; a cut whose moved frontier cannot reach the best
       built efficiency at the target is only probed): the extension lowers the fake rate
       most at high cuts, where the dissolved pieces are many (at walk cut 0.9 a formula fake
       rate of 0.05 builds 0.018), so the frontier of all cuts' formula points can hold none
       of the cut the rule would take;
    2. with a budget, on each family's own frontier (:func:`family`), the ``size`` points
       nearest the floor (the plain choice's exact efficiency less ``quality_budget``), then
       as many nearest it once their formula efficiencies are moved by the family's median
       (exact - formula) of those (the extension moves a point's efficiency by more than the
       points' spacing);
    3. the points of each frontier between the chosen point's built neighbours (``size`` more
       on each at most).
    """
    fronts = [frontier(points)]
    if quality_budget is not None:
        fronts.append(frontier([p for p in points if is_plain(p)]))
    exact: dict[TrackPoint, TrackPoint] = {}

    def add(chosen: list[TrackPoint]) -> None:
        fresh = list(dict.fromkeys(p for p in chosen if p not in exact))
        exact.update(zip(fresh, build(fresh)))

    def refine(front: list[TrackPoint], chosen: TrackPoint) -> None:
        formula = next(p for p, q in exact.items() if q == chosen)
        if formula not in front:
            return
        at = front.index(formula)
        built = [i for i, p in enumerate(front) if p in exact]
        low = max([i for i in built if i < at], default=0)
        high = min([i for i in built if i > at], default=len(front) - 1)
        add(spread(front[low + 1:at] + front[at + 1:high], size))

    add([p for front in fronts for p in spread(front, size)])
    add(_nearest(fronts[-1], "fake_rate", fake_target, size))   # where the (plain) choice lies
    first = [p for p in points if is_plain(p)] if quality_budget is not None else points
    for cut in sorted({p.cut for p in first}, reverse=True):
        front = frontier([p for p in first if p.cut == cut])
        probe = spread(front, max(2, size // 2))
        add(probe)      # how the extension moves this cut's fake rates, then its points there
        fronts.append(front)
        if _cut_reach(front, probe, exact, fake_target) < _reached(exact, fake_target) - 0.002:
            continue    # this cut's best at the target stays below a built point's
        add(sorted(front, key=lambda p: (abs(_exact_fake(p, probe, exact) - fake_target),
                                         -p.efficiency))[:max(2, size // 2)])
    if quality_budget is not None:
        plain = [q for p, q in exact.items() if is_plain(p)]
        floor = best_point(plain, fake_target).efficiency - quality_budget
        for kind in sorted({family(p) for p in points if not is_plain(p)}):
            front = frontier([p for p in points if family(p) == kind])
            window = _nearest(front, "efficiency", floor, size)
            add(window)   # then again where the window's exact efficiencies say the floor is
            offset = float(np.median([exact[p].efficiency - p.efficiency for p in window]))
            add(_nearest(front, "efficiency", floor - offset, size))
            fronts.append(front)
    best = choose(list(exact.values()), fake_target, quality_budget)
    for front in fronts:
        refine(front, best)
    return list(exact.values())
