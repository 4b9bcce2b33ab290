"""The one checkpoint format: round trip, checksum against corruption, wrong stage, old format."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from trkx.cli import main
from trkx.files.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from trkx.gnn.checkpoint import load_model
from trkx.gnn.model import InteractionGNN


def gnn_checkpoint(path: Path) -> tuple[Path, InteractionGNN]:
    torch.manual_seed(0)
    constructor = {"node_features": 3, "hidden": 16, "n_graph_iters": 2}
    model = InteractionGNN(**constructor)
    save_checkpoint(path, "gnn", constructor, model.state_dict(), {"edge_cut": 0.4},
                    {"model": {"hidden": 16}}, {"val_efficiency": 0.9})
    return path, model


def one_error_line(capsys: pytest.CaptureFixture) -> str:
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def test_round_trip_gives_the_same_network(tmp_path: Path) -> None:
    path, model = gnn_checkpoint(tmp_path / "gnn.pt")
    loaded, stored = load_model(path)
    assert stored.working_point == {"edge_cut": 0.4} and stored.metrics["val_efficiency"] == 0.9
    assert stored.config == {"model": {"hidden": 16}} and stored.constructor["hidden"] == 16
    for name, tensor in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], tensor)


def test_a_flipped_weight_byte_is_detected(tmp_path: Path) -> None:
    path, model = gnn_checkpoint(tmp_path / "gnn.pt")
    data = bytearray(path.read_bytes())
    weight = model.state_dict()["edge_encoder.0.weight"].numpy().tobytes()
    at = bytes(data).find(weight[:64])
    assert at > 0                                       # the raw tensor bytes are in the file
    data[at + 10] ^= 0x01                               # one bit of one weight
    path.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="checksum mismatch"):
        load_checkpoint(path, "gnn")


def test_fifty_flipped_bytes_give_one_line_and_exit_2(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture) -> None:
    path, _ = gnn_checkpoint(tmp_path / "gnn.pt")
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    for i in range(middle, middle + 50):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))
    (tmp_path / "events").mkdir()
    assert main(["infer", "gnn", "--checkpoint", str(path), "--events",
                 str(tmp_path / "events"), "--out", str(tmp_path / "out")]) == 2
    line = one_error_line(capsys)
    assert line.startswith("trkx infer: error:") and str(path) in line
    assert "checksum mismatch" in line or "not a readable" in line


def test_wrong_stage_and_old_format(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path, _ = gnn_checkpoint(tmp_path / "gnn.pt")
    (tmp_path / "events").mkdir()
    assert main(["infer", "filter", "--checkpoint", str(path), "--events",
                 str(tmp_path / "events"), "--out", str(tmp_path / "out")]) == 2
    assert "a gnn checkpoint, not a filter one" in one_error_line(capsys)
    old = tmp_path / "old.pt"
    torch.save({"stage": "filter", "hparams": {}, "state_dict": {}, "extra": {}}, old)
    assert main(["infer", "filter", "--checkpoint", str(old), "--events",
                 str(tmp_path / "events"), "--out", str(tmp_path / "out")]) == 2
    line = one_error_line(capsys)
    assert "old checkpoint format" in line and "re-train it with `trkx train filter`" in line
