"""The record contract (trkx.data.record.FIELDS): declared once, documented, checked on read."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from trkx.cli import main
from trkx.data.io import load_event
from trkx.data.record import (
    FIELD,
    FIELDS,
    build_event_record,
    check_record,
    load_record,
    save_record,
)
from trkx.files.errors import TrackMLFormatError

DESIGN = Path(__file__).resolve().parents[1] / "docs" / "design.md"


def test_the_design_table_is_the_declared_contract() -> None:
    """Every row of docs/design.md's record table names declared fields with their stage."""
    section = DESIGN.read_text().split("## The event record", 1)[1].split("\n## ", 1)[0]
    documented = {}
    for row in re.findall(r"^\| (`.+?) \| (.+?) \| (.+?) \|", section, re.M):
        for name in re.findall(r"`(\w+)`", row[0]):
            documented[name] = row[2].split(",")[0].strip()
    assert documented == {f.name: f.stage for f in FIELDS}


def test_a_built_record_has_the_declared_dtypes_and_shapes(sample_prefix: Path) -> None:
    hits, cells, particles, truth = load_event(sample_prefix)
    record = build_event_record(hits[:500], cells, particles, truth, use_cells=False,
                                event_id=7)
    check_record(record)
    stage_data = [f.name for f in FIELDS if f.stage == "data"]
    assert all(getattr(record, name).dtype == FIELD[name].dtype for name in stage_data)
    assert record.x.shape == (500, 3) and record.track_edges.shape[0] == 2
    record.x, record.pos = record.x.double(), record.pos.double()   # float64 tests: accepted
    check_record(record)
    record.hit_id = record.hit_id.int()
    with pytest.raises(TrackMLFormatError, match="'hit_id' has dtype int32, expected int64"):
        check_record(record)


def _event(n: int = 5, e: int = 4):
    from trkx.data.record_type import Record

    return Record(x=torch.zeros(n, 3), edge_index=torch.tensor([[0, 1, 2, 3], [1, 2, 3, 4]])[:, :e],
                y=torch.ones(e, dtype=torch.bool), scores=torch.full((e,), 0.5))


@pytest.mark.parametrize("field, value, message", [
    ("y", torch.ones(4), "field 'y' has dtype float32, expected bool"),
    ("scores", torch.zeros(3), "field 'scores' has shape (3,), expected [E] with E=4"),
    ("hit_id", torch.arange(6), "field 'hit_id' has shape (6,), expected [N] with N=5"),
    ("edge_index", torch.tensor([[0, 1, 2, 3], [1, 2, 3, 5]]), "'edge_index' names hits "
     "outside [0, 5)"),
])
def test_a_record_against_the_contract_is_named_on_read(tmp_path: Path, field, value,
                                                       message) -> None:
    record = _event()
    setattr(record, field, value)
    save_record(record, tmp_path / "event000000001.pt")
    with pytest.raises(TrackMLFormatError, match=re.escape(message)):
        load_record(tmp_path / "event000000001.pt")


def test_a_broken_record_is_one_line_and_exit_2(tmp_path: Path, capsys) -> None:
    record = _event()
    record.scores = torch.zeros(3)
    save_record(record, tmp_path / "records" / "event000000001.pt")
    assert main(["build-tracks", "--events", str(tmp_path / "records"), "--out",
                 str(tmp_path / "tracks")]) == 2
    err = [line for line in capsys.readouterr().err.replace("\r", "\n").splitlines()
           if line.strip() and "%|" not in line]          # progress-bar frames
    assert len(err) == 1 and "event000000001.pt: field 'scores' has shape (3,)" in err[0]
    assert not (tmp_path / "tracks").exists() or not list((tmp_path / "tracks").iterdir())


def test_every_stage_reports_one_purity_and_cuts_with_ge() -> None:
    """Purity is truth-graph edges among kept edges in the embedding, filter and GNN reports,
    and an edge whose score equals the cut is kept."""
    from trkx.data.record_type import Record
    from trkx.embedding.labels import graph_metrics
    from trkx.filter.module import filter_metrics
    from trkx.gnn.metrics import edge_metrics

    y = torch.tensor([True, False, False, True])
    y_pid = torch.tensor([True, True, False, True])           # edge 1: same particle, skip
    signal = torch.tensor([True, False, False, False])
    scores = torch.tensor([0.5, 0.9, 0.1, 0.2])               # cut 0.5 keeps edges 0 and 1
    record = Record(x=torch.zeros(5, 3), edge_index=torch.tensor([[0, 1, 2, 3], [1, 2, 3, 4]]),
                  y=y, y_pid=y_pid, signal=signal, track_edges=torch.tensor([[0], [1]]),
                  signal_hit=torch.tensor([True, True, False, False, False]))
    gnn = edge_metrics(scores, y, signal, torch.ones(4), cut=0.5)
    assert gnn.purity == 0.5 and gnn.efficiency == 1.0
    assert filter_metrics(record, scores, 0.5)["purity"] == 0.5
    assert filter_metrics(record, scores, 0.5)["signal_efficiency"] == 1.0
    keep = scores >= 0.5
    assert graph_metrics(record, keep)["purity"] == 0.5
    assert graph_metrics(record, keep)["purity_pid"] == 1.0
