"""Which models ``trkx infer`` runs on which events.

With ``--config``/``--checkpoints`` the given pipeline runs on every event. Without them the
models shipped with trkx (:mod:`trkx.models`) are chosen per event: the set that reads the
cluster shapes on an event with a cells file, the hits-only set on the others
(:func:`trkx.models.models_for`). Events are grouped by set, in their listing order, so each set
is loaded once.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from trkx.models import CELLS


class ModelGroup(NamedTuple):
    """One set of models and the events it runs on (``name``: the shipped set, or None for
    the pipeline given on the command line)."""

    name: str | None
    config: Path
    checkpoints: Path
    events: list[str]


def has_cells(prefix: str) -> bool:
    """Whether the event ``prefix`` comes with a cells file."""
    from trkx.data.io import find_part_file
    from trkx.files.errors import EventFileNotFoundError

    try:
        find_part_file(prefix, "cells")
    except EventFileNotFoundError:
        return False
    return True


def model_groups(config: Path | None, checkpoints: Path | None,
                 prefixes: list[str]) -> list[ModelGroup]:
    """The sets of models to run: ``config``/``checkpoints`` on every event when given, else
    the shipped cells set on the events with cells and the hits-only set on the others."""
    if config is not None and checkpoints is not None:
        return [ModelGroup(None, config, checkpoints, prefixes)]
    from trkx.models import models_for, shipped_models

    chosen: dict[str, list[str]] = {}
    for prefix in prefixes:
        chosen.setdefault(models_for(has_cells(prefix)), []).append(prefix)
    groups = []
    for name, events in chosen.items():
        shipped = shipped_models(name)
        groups.append(ModelGroup(name, shipped.config, shipped.checkpoints, events))
    return groups


def describe(groups: list[ModelGroup]) -> str | None:
    """The summary line's and ``timing.json``'s ``models`` entry, e.g. ``pu200_cells (cells,
    3 event(s)), pu200 (hits only, 1 event(s))``; None for a pipeline given on the command
    line."""
    if groups[0].name is None:
        return None
    return ", ".join(f"{g.name} ({'cells' if g.name == CELLS else 'hits only'}, "
                     f"{len(g.events)} event(s))" for g in groups)


def evaluation_per_set(groups: list[ModelGroup], configs: list, pipelines: list,
                       event_ids: dict[str, int]) -> tuple[object, dict[int, float],
                                                           dict[int, str]]:
    """How a run of several sets is evaluated: the metric cuts (the first set's tracks
    config), each event's edge cut (that of the builder of the set that made its tracks:
    ``pipelines[i]``, or the set's tuned tracks config where workers loaded it) and
    each event's set (``given`` for a pipeline named on the command line); ``configs`` are
    the sets' pipeline configs, ``event_ids`` the event id of each prefix."""
    from trkx.pipeline.inference import tracks_config_path
    from trkx.tracks.evaluate.evaluation import evaluation_settings

    settings = [evaluation_settings(str(tracks_config_path(c.stage_config_path(c.tracks),
                                                           g.checkpoints)),
                                    list(c.tracks.overrides), loaded and loaded.builder)
                for g, c, loaded in zip(groups, configs, pipelines)]
    edge_cut = {event_ids[p]: cut for g, (_, cut) in zip(groups, settings) for p in g.events}
    sets = {event_ids[p]: g.name or "given" for g in groups for p in g.events}
    return settings[0][0], edge_cut, sets
