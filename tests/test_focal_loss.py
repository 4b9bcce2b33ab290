"""The focal factor of the edge loss (``module.focal_gamma``): each term times
``|target - score|^gamma``, off at 0, on hard and soft targets, and in the GNN's training
step."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch.nn import functional as F

from trkx.edges.loss import weighted_bce
from trkx.gnn.model import InteractionGNN
from trkx.gnn.module import GNNModule

from .gnn_records import graph_record


def test_the_focal_factor_weighs_each_term_by_its_distance_to_the_target() -> None:
    logits = torch.tensor([3.0, -2.0, 0.5, 2.5, -0.3], dtype=torch.float64)
    target = torch.tensor([1.0, 0.0, 1.0, 0.0, 0.4], dtype=torch.float64)   # a soft one last
    weights = torch.tensor([1.0, 0.2, 2.0, 0.2, 1.0], dtype=torch.float64)
    bce = F.binary_cross_entropy_with_logits(logits, target, reduction="none")
    score = torch.sigmoid(logits)
    for gamma in (1.0, 2.0):
        expected = (weights * bce * (target - score).abs() ** gamma).sum() / weights.sum()
        torch.testing.assert_close(weighted_bce(logits, target, weights, gamma), expected)
    torch.testing.assert_close(weighted_bce(logits, target, weights, 0.0),
                               (weights * bce).sum() / weights.sum())
    # the hard edges dominate: the high-scored fake (logit 2.5) outweighs the easy true edge
    terms = bce * (target - score).abs() ** 2
    assert terms[3] > 50 * terms[0]
    with pytest.raises(ValueError, match="focal_gamma"):
        weighted_bce(logits, target, weights, -1.0)


def test_the_gnn_training_step_takes_the_focal_factor(sample_prefix: Path,
                                                      ) -> None:
    record = graph_record(sample_prefix, (0.0, 0.6), fakes_per_true=1.0, seed=0)
    torch.manual_seed(0)
    network = InteractionGNN(record.x.shape[1], hidden=8, n_graph_iters=1)
    plain = GNNModule(network, graph_ops="csr")
    focal = GNNModule(network, graph_ops="csr", focal_gamma=2.0)
    with torch.no_grad():
        logits = plain(record)
    weights = plain._weights(record)
    assert torch.isclose(focal.training_step(record, 0),
                         weighted_bce(logits, record.y, weights, 2.0))
    assert torch.isclose(plain.training_step(record, 0), weighted_bce(logits, record.y, weights))
    assert focal.training_step(record, 0) < plain.training_step(record, 0)
    with pytest.raises(ValueError, match="focal_gamma"):
        GNNModule(network, graph_ops="csr", focal_gamma=-0.5)


def test_a_run_without_the_focal_factor_resumes_runs_stored_before_it() -> None:
    """``focal_gamma: 0`` (the default every stage config now names) keeps the resume key of a
    run stored before the key existed; another value is another run."""
    from trkx.training.fit import _resume_key

    before = _resume_key({"module": {"learning_rate": 1e-3}})
    assert _resume_key({"module": {"learning_rate": 1e-3, "focal_gamma": 0.0}}) == before
    assert _resume_key({"module": {"learning_rate": 1e-3, "focal_gamma": 2.0}}) != before
