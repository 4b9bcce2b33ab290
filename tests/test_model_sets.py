"""trkx infer's choice of models per event (trkx.cli.model_sets): the shipped cells set on
events with a cells file, the hits-only set on the others, each set once, in listing order."""

from __future__ import annotations

from pathlib import Path

from trkx.models import CELLS, DEFAULT, shipped_models
from trkx.pipeline.model_sets import describe, has_cells, model_groups


def event(folder: Path, event_id: int, cells: bool, gz: bool = False) -> str:
    prefix = folder / f"event{event_id:09d}"
    Path(f"{prefix}-hits.csv").write_text("hit_id,x,y,z,volume_id,layer_id,module_id\n")
    if cells:
        Path(f"{prefix}-cells.csv{'.gz' if gz else ''}").write_bytes(b"")
    return str(prefix)


def test_events_are_grouped_by_the_set_their_files_call_for(tmp_path: Path) -> None:
    prefixes = [event(tmp_path, 1, cells=False), event(tmp_path, 2, cells=True),
                event(tmp_path, 3, cells=False), event(tmp_path, 4, cells=True, gz=True)]
    assert [has_cells(p) for p in prefixes] == [False, True, False, True]
    groups = model_groups(None, None, prefixes)
    assert [(g.name, g.events) for g in groups] == [
        (DEFAULT, [prefixes[0], prefixes[2]]), (CELLS, [prefixes[1], prefixes[3]])]
    for group in groups:
        shipped = shipped_models(group.name)
        assert (group.config, group.checkpoints) == (shipped.config, shipped.checkpoints)
    assert describe(groups) == (f"{DEFAULT} (hits only, 2 event(s)), "
                                f"{CELLS} (cells, 2 event(s))")


def test_a_given_pipeline_runs_on_every_event(tmp_path: Path) -> None:
    prefixes = [event(tmp_path, 1, cells=False), event(tmp_path, 2, cells=True)]
    config, checkpoints = tmp_path / "pipeline.yaml", tmp_path / "checkpoints"
    groups = model_groups(config, checkpoints, prefixes)
    assert [(g.name, g.config, g.checkpoints, g.events) for g in groups] == [
        (None, config, checkpoints, prefixes)]
    assert describe(groups) is None
