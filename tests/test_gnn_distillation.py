"""Distillation (``module.teacher``): the loss's target mixes the truth with a trained GNN's
scores, the teacher stays out of the student's weights, a student learns the teacher's
decisions, and a resumed run knows its teacher by content, not by path."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from trkx.cli import main
from trkx.data.record import save_record
from trkx.edges.loss import weighted_bce
from trkx.files.checkpoint import save_checkpoint
from trkx.gnn.model import InteractionGNN
from trkx.gnn.module import GNNModule
from trkx.training.fit import _resume_key

from .gnn_records import graph_record

pytestmark = pytest.mark.usefixtures("one_thread")


def _teacher_file(path: Path, record, seed: int = 3) -> tuple[Path, InteractionGNN]:
    """A small GNN trained 30 steps on ``record``'s truth (scores spread over (0, 1)), saved
    as a GNN model file."""
    torch.manual_seed(seed)
    constructor = {"node_features": record.x.shape[1], "hidden": 16, "n_graph_iters": 2}
    network = InteractionGNN(**constructor)
    module = GNNModule(network, graph_ops="csr")
    optimizer = torch.optim.Adam(network.parameters(), lr=3e-3)
    for _ in range(30):
        optimizer.zero_grad()
        weighted_bce(module(record), record.y, torch.ones(record.y.shape[0])).backward()
        optimizer.step()
    save_checkpoint(path, "gnn", constructor, network.state_dict(), {"edge_cut": 0.5},
                    {"module": {}}, {})
    return path, network.eval()


def test_the_target_mixes_truth_and_the_teachers_scores(sample_prefix: Path,
                                                         tmp_path: Path) -> None:
    record = graph_record(sample_prefix, (0.0, 0.6), fakes_per_true=1.0, seed=0)
    path, teacher = _teacher_file(tmp_path / "teacher.pt", record)
    student = GNNModule(InteractionGNN(record.x.shape[1], hidden=8, n_graph_iters=1),
                        graph_ops="csr", teacher=str(path), distill_weight=0.25)
    ops = student._graph_ops(record)
    with torch.no_grad():
        expected_scores = torch.sigmoid(teacher(record.x, ops, None))
        target = student._target(record, ops)
    torch.testing.assert_close(target, 0.75 * record.y.float() + 0.25 * expected_scores)
    assert 0.05 < float(expected_scores.std())       # the mix is not the truth alone
    # the teacher is frozen and no part of the student's weights or optimiser
    assert not any(p.requires_grad for p in student.teacher_network().parameters())
    assert all(not k.startswith("_teacher") for k in student.state_dict())
    assert sum(p.numel() for p in student.parameters()) == sum(
        p.numel() for p in student.model.parameters())
    # no teacher, or a zero share: the truth itself
    assert GNNModule(student.model, teacher=str(path), distill_weight=0.0)._target(
        record, ops) is record.y
    with pytest.raises(ValueError, match="distill_weight"):
        GNNModule(student.model, teacher=str(path), distill_weight=1.5)


@pytest.mark.slow
def test_a_student_learns_the_teachers_scores(sample_prefix: Path, tmp_path: Path) -> None:
    record = graph_record(sample_prefix, (0.0, 0.8), fakes_per_true=1.0, seed=1)
    path, teacher = _teacher_file(tmp_path / "teacher.pt", record)

    def trained(distill_weight: float) -> torch.Tensor:
        torch.manual_seed(0)
        module = GNNModule(InteractionGNN(record.x.shape[1], hidden=16, n_graph_iters=2),
                           graph_ops="csr", teacher=str(path), distill_weight=distill_weight)
        optimizer = torch.optim.Adam(module.parameters(), lr=3e-3)
        ops = module._graph_ops(record)
        for _ in range(120):
            optimizer.zero_grad()
            loss = weighted_bce(module(record), module._target(record, ops),
                                torch.ones(record.y.shape[0]))
            loss.backward()
            optimizer.step()
        with torch.no_grad():
            return torch.sigmoid(module(record))

    with torch.no_grad():
        wanted = torch.sigmoid(teacher(record.x, GNNModule(teacher)._graph_ops(record), None))
    distilled = (trained(1.0) - wanted).abs().mean()
    from_truth = (trained(0.0) - wanted).abs().mean()
    assert distilled < 0.5 * from_truth and distilled < 0.05


def test_a_resumed_run_knows_its_teacher_by_content(sample_prefix: Path, tmp_path: Path) -> None:
    record = graph_record(sample_prefix, (0.0, 0.3), fakes_per_true=1.0, seed=0)
    first = tmp_path / "a" / "gnn.pt"
    first.parent.mkdir()
    _teacher_file(first, record)
    moved = tmp_path / "b.pt"
    shutil.copyfile(first, moved)
    other = tmp_path / "c.pt"
    _teacher_file(other, record, seed=4)

    def key(path: Path) -> str:
        return _resume_key({"module": {"teacher": str(path), "learning_rate": 1e-3}})

    assert key(first) == key(moved) != key(other)
    assert "sha256:" in key(first) and str(first) not in key(first)
    # without a teacher the run is the one stored before distillation existed
    before = _resume_key({"module": {"learning_rate": 1e-3}})
    assert _resume_key({"module": {"teacher": None, "distill_weight": 0.5,
                                   "learning_rate": 1e-3}}) == before


def test_a_missing_teacher_is_named_before_training(sample_prefix: Path, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    config = Path(__file__).resolve().parents[1] / "configs" / "gnn.yaml"
    save_record(graph_record(sample_prefix, (0.0, 1.0), 1.0, seed=0), tmp_path / "d" / "a.pt")
    assert main(["train", "gnn", "--config", str(config), "--checkpoint", str(tmp_path / "r.pt"),
                 "--set", f"data.train_dir={tmp_path / 'd'}", "--set", "model.edge_features=0",
                 "--set", "data.val_events=0",
                 "--set", f"module.teacher={tmp_path / 'none.pt'}"]) == 2
    assert f"module.teacher {tmp_path / 'none.pt'}: no such model file" in capsys.readouterr().err
    assert not (tmp_path / "r.pt").exists() and not (tmp_path / "r.run").exists()
