"""The filter's distillation (``module.teacher``): the training target mixes the truth with a
trained filter's scores (its own edge features), validation stays on the truth, the teacher
stays out of the student's weights, a student learns the teacher's ranking, and a missing
teacher is named before training."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from trkx.cli import main
from trkx.data.detector import load_detector
from trkx.data.events import event_record
from trkx.data.record import save_record
from trkx.data.record_type import Record
from trkx.edges.loss import weighted_bce
from trkx.files.checkpoint import save_checkpoint
from trkx.filter.features import edge_features
from trkx.filter.model import FilterMLP
from trkx.filter.module import FilterModule

from .test_filter import _geometric_graph

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def event(sample_prefix: Path) -> Record:
    """About 40 particles' hits and some noise, with a labelled graph of true and fake edges."""
    record = event_record(str(sample_prefix), load_detector(), use_cells=True, signal_pt_min=1.0)
    rng = np.random.default_rng(1)
    pid = record.particle_id.numpy()
    chosen = rng.choice(np.unique(pid[pid != 0]), 40, replace=False)
    noise = rng.choice(np.flatnonzero(pid == 0), 30, replace=False)
    return _geometric_graph(record, np.sort(np.concatenate(
        [np.flatnonzero(np.isin(pid, chosen)), noise])))


def _teacher_file(path: Path, record: Record) -> tuple[Path, FilterMLP]:
    """A filter with the trajectory inputs (which the students below lack), trained 20 steps on
    ``record``'s truth and saved as a filter model file: its scores are soft, not the truth."""
    torch.manual_seed(3)
    constructor = {"hit_features": 9, "cell_agreement": True, "hidden": 32, "layers": 2,
                   "trajectory": True}
    network = FilterMLP(**constructor)
    module = FilterModule(network)
    optimiser = torch.optim.Adam(network.parameters(), lr=3e-3)
    for _ in range(20):
        optimiser.zero_grad()
        module.edge_loss(record).backward()
        optimiser.step()
    save_checkpoint(path, "filter", constructor, network.state_dict(), {"score_cut": 0.5},
                    {"module": {}}, {})
    return path, network.eval()


def _teacher_scores(teacher: FilterMLP, record: Record) -> torch.Tensor:
    with torch.no_grad():
        return torch.sigmoid(teacher(edge_features(record.x, record.pos, record.edge_index,
                                                   record.feature_names, 9, True)))


def test_the_training_target_mixes_truth_and_the_teachers_scores(event: Record,
                                                                 tmp_path: Path) -> None:
    path, teacher = _teacher_file(tmp_path / "teacher.pt", event)
    scores = _teacher_scores(teacher, event)
    assert 0.1 < float(scores.std())                  # the mix is not the truth alone
    torch.manual_seed(0)
    student = FilterModule(FilterMLP(11, cell_agreement=True, hidden=8, layers=1),
                           teacher=str(path), distill_weight=0.25)
    plain = FilterModule(student.network)
    logits = student.network(edge_features(event.x, event.pos, event.edge_index,
                                           event.feature_names, 11, False))
    weights = torch.where(event.signal.bool(), 3.0, 1.0)    # signal_weight 3, pos_weight 1
    with torch.no_grad():
        expected = weighted_bce(logits, 0.75 * event.y.float() + 0.25 * scores, weights)
        torch.testing.assert_close(student.edge_loss(event, distill=True), expected)
        # validation (no distill) and a student without a teacher: the truth's loss
        truth = weighted_bce(logits, event.y, weights)
        torch.testing.assert_close(student.edge_loss(event), truth)
        torch.testing.assert_close(plain.edge_loss(event, distill=True), truth)
        assert not torch.allclose(expected, truth)
    # the teacher is frozen and no part of the student's weights
    assert not any(p.requires_grad for p in student.teacher_network().parameters())
    assert sum(p.numel() for p in student.parameters()) == sum(
        p.numel() for p in student.network.parameters())
    assert all(not key.startswith("_teacher") for key in student.state_dict())
    with pytest.raises(ValueError, match="distill_weight"):
        FilterModule(student.network, teacher=str(path), distill_weight=-0.1)


@pytest.mark.slow
def test_a_student_learns_the_teachers_ranking(event: Record, tmp_path: Path) -> None:
    path, teacher = _teacher_file(tmp_path / "teacher.pt", event)
    wanted = _teacher_scores(teacher, event)

    def trained(distill_weight: float) -> torch.Tensor:
        torch.manual_seed(0)
        module = FilterModule(FilterMLP(11, cell_agreement=True, hidden=16, layers=2),
                              teacher=str(path), distill_weight=distill_weight)
        optimiser = torch.optim.Adam(module.parameters(), lr=3e-3)
        for _ in range(200):
            optimiser.zero_grad()
            module.edge_loss(event, distill=True).backward()
            optimiser.step()
        return module.scores(event)

    distilled = (trained(1.0) - wanted).abs().mean()
    from_truth = (trained(0.0) - wanted).abs().mean()
    assert distilled < 0.5 * from_truth and distilled < 0.05


def test_a_missing_teacher_is_named_before_training(event: Record, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    config = Path(__file__).resolve().parents[1] / "configs" / "filter.yaml"
    save_record(event, tmp_path / "d" / "a.pt")
    missing = tmp_path / "none.pt"
    assert main(["train", "filter", "--config", str(config), "--checkpoint",
                 str(tmp_path / "f.pt"), "--set", f"data.train_dir={tmp_path / 'd'}",
                 "--set", "data.train_events=1", "--set", "data.val_events=0",
                 "--set", f"module.teacher={missing}"]) == 2
    assert f"module.teacher {missing}: no such model file" in capsys.readouterr().err
    assert not (tmp_path / "f.pt").exists() and not (tmp_path / "f.run").exists()
