"""Every user mistake ends with one line naming the file/key/value and exit status 2."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from trkx.cli import main
from trkx.config import ConfigError, load_config
from trkx.data.record import save_record
from trkx.embedding.model import EmbeddingMLP
from trkx.files.checkpoint import save_checkpoint

from .gnn_records import graph_record

CONFIGS = Path(__file__).resolve().parents[1] / "configs"


def error_line(capsys: pytest.CaptureFixture) -> str:
    """The one message line on stderr (progress-bar frames, separated by \\r, are not messages)."""
    err = capsys.readouterr().err.replace("\r", "\n")
    lines = [line for line in err.splitlines()
             if line.strip() and not line.startswith("trkx: warning") and "it/s]" not in line
             and "s/it]" not in line and "event/s]" not in line and "s/event]" not in line]
    assert len(lines) == 1, lines
    return lines[0]


def train_gnn(*sets: str) -> int:
    return main(["train", "gnn", "--config", str(CONFIGS / "gnn.yaml"), "--checkpoint",
                 "/nonexistent/never-written.pt", *(i for s in sets for i in ("--set", s))])


def test_bad_path(capsys) -> None:
    assert train_gnn("data.train_dir=/no/such/folder") == 2
    assert "/no/such/folder: no such folder (data.train_dir)" in error_line(capsys)


def test_bad_key_and_bad_type_name_the_key(capsys) -> None:
    assert train_gnn("model.hiden=8") == 2
    assert "--set model.hiden=8: unknown key 'hiden' (did you mean 'hidden'?)" in \
        error_line(capsys)
    assert train_gnn("model.hidden=abc") == 2
    assert "--set model.hidden=abc: key 'hidden' must be an int, got 'abc' (str)" in \
        error_line(capsys)
    assert train_gnn("trainer.max_steps=10x") == 2
    assert "--set trainer.max_steps=10x: key 'max_steps' must be an int or null, got '10x'" \
        in error_line(capsys)


def test_too_few_events_for_the_split(sample_prefix: Path, tmp_path: Path, capsys) -> None:
    save_record(graph_record(sample_prefix, (0.0, 0.5), 1.0, seed=0), tmp_path / "event1.pt")
    assert train_gnn(f"data.train_dir={tmp_path}", "data.train_events=5") == 2
    line = error_line(capsys)
    assert "data.train_events + data.val_events = 6" in line and "holds 1 event(s)" in line


def test_filter_on_records_without_edges(sample_prefix: Path, tmp_path: Path, capsys) -> None:
    record = graph_record(sample_prefix, (0.0, 0.5), 1.0, seed=0)
    del record.edge_index
    record.event_id = torch.tensor(7)
    for i in (1, 2):
        save_record(record, tmp_path / f"event{i:09d}.pt")
    assert main(["train", "filter", "--config", str(CONFIGS / "filter.yaml"),
                 "--checkpoint", str(tmp_path / "f.pt"), "--set", f"data.train_dir={tmp_path}",
                 "--set", "data.train_events=1"]) == 2
    line = error_line(capsys)
    assert "event 7 has no edge_index" in line and "trkx infer embedding" in line


def test_missing_cells_for_a_cells_model(sample_prefix: Path, tmp_path: Path, capsys) -> None:
    network = EmbeddingMLP(11, 8, 1, 4, True)
    stored_config = load_config(CONFIGS / "embedding.yaml")   # as training stores it
    stored_config["data"]["use_cells"] = True
    checkpoint = tmp_path / "embedding.pt"
    save_checkpoint(checkpoint, "embedding", {"in_features": 11, "hidden": 8, "layers": 1,
                                              "embedding_dim": 4, "layer_norm": True},
                    network.state_dict(), {"radius": 0.1, "max_neighbours": 4},
                    stored_config, {})
    events = tmp_path / "events"
    events.mkdir()
    (events / "event000000001-hits.csv.gz").symlink_to(f"{sample_prefix}-hits.csv.gz")
    assert main(["infer", "embedding", "--checkpoint", str(checkpoint), "--events", str(events),
                 "--out", str(tmp_path / "out")]) == 2
    line = error_line(capsys)
    assert "event000000001-cells.csv[.gz]: missing" in line and "use_cells" in line


def test_distributed_config_without_torchrun(monkeypatch, capsys) -> None:
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert main(["train", "gnn", "--config", str(CONFIGS / "gnn_distributed.yaml"),
                 "--checkpoint", "/nonexistent/never-written.pt"]) == 2
    line = error_line(capsys)
    assert "must run under torchrun" in line and "torchrun --nproc-per-node P -m trkx" in line


def test_unknown_stage_of_evaluate(tmp_path: Path, capsys) -> None:
    assert main(["evaluate", "--tracks", str(tmp_path), "--events", str(tmp_path), "--out",
                 str(tmp_path / "o"), "--stage", f"embeding={tmp_path}"]) == 2
    assert "--stage 'embeding=" in error_line(capsys)


def test_debug_shows_the_traceback(monkeypatch) -> None:
    with pytest.raises(ConfigError, match="unknown key 'hiden'"):
        main(["--debug", "train", "gnn", "--config", str(CONFIGS / "gnn.yaml"), "--set",
              "model.hiden=8"])
    monkeypatch.setenv("TRKX_DEBUG", "1")
    with pytest.raises(ConfigError, match="unknown key 'hiden'"):
        train_gnn("model.hiden=8")


@pytest.mark.subprocess
@pytest.mark.parametrize("inherited", [signal.SIG_DFL, signal.SIG_IGN],
                         ids=["foreground", "background-job"])
def test_ctrl_c_prints_one_line_and_exits_130(tmp_path: Path, inherited) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "trkx", "simulate", "--out", str(tmp_path), "--n-events", "50",
         "--pileup", "200"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        # SIG_DFL: a foreground command at a terminal; SIG_IGN: what a background job of a
        # script (``nohup trkx run ... &``) inherits, which trkx must undo to be stoppable
        preexec_fn=lambda: signal.signal(signal.SIGINT, inherited))
    deadline = time.time() + 60
    while not list(tmp_path.glob("event*-hits.csv.gz")) and time.time() < deadline:
        time.sleep(0.2)                     # the command is simulating
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130
    assert "Traceback" not in err and err.strip().splitlines()[-1] == \
        "trkx simulate: interrupted"


@pytest.mark.parametrize("section,message", [
    ({"overlap": "yes"}, "distributed: key 'overlap' must be true/false, got 'yes'"),
    ({"algorithm": "oblivious-1d", "overlap": False},
     "distributed.overlap: false is a switch of sparse-1d"),
])
def test_distributed_overlap_is_checked(section, message) -> None:
    from trkx.gnn.distributed.train import check_section
    with pytest.raises(ConfigError, match=message):
        check_section(section, "gnn.yaml")
    check_section({"overlap": False}, "gnn.yaml")          # sparse-1d, synchronous: accepted
