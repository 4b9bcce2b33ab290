"""The receptive field is complete: with ``hops = n_graph_iters + 1`` and no fan-out limit the
scores of target edges on a sampled subgraph equal their full-graph scores (float64)."""

from __future__ import annotations

import pytest
import torch

from trkx.edges.loss import edge_weights, weighted_bce
from trkx.gnn.local_ops import CsrGraphOps
from trkx.gnn.model import InteractionGNN
from trkx.gnn.module import GNNModule
from trkx.gnn.sampling.sampler import sample_subgraphs

from .test_sampling import random_graph

pytestmark = pytest.mark.usefixtures("one_thread")


def scores(model: InteractionGNN, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model(x, CsrGraphOps(edge_index, x.shape[0]))


@pytest.mark.parametrize("iterations", [1, 3])
def test_target_edge_scores_equal_full_graph_scores(iterations: int) -> None:
    data = random_graph(11, 500, 900)          # mean degree 3.6: neighbourhoods stay partial
    data.x = data.x.double()
    torch.manual_seed(0)
    model = InteractionGNN(3, hidden=8, n_graph_iters=iterations, n_mlp_layers=1).double()
    full = scores(model, data.x, data.edge_index)
    targets = [torch.tensor([0, 1, 2, 3]), torch.tensor([100]), torch.tensor([250, 400])]
    exact = sample_subgraphs(data, targets, hops=iterations + 1)
    short = sample_subgraphs(data, targets, hops=iterations)
    worst_short = 0.0
    for record, cut in zip(exact, short):
        assert record.num_nodes < 500 and bool(record.target_edge_mask.any())
        sub = scores(model, record.x, record.edge_index)
        mask = record.target_edge_mask
        assert torch.allclose(sub[mask], full[record.edge_ids[mask]], rtol=0, atol=1e-10)
        # edges at the border of the subgraph see a truncated neighbourhood
        assert float((sub[~mask] - full[record.edge_ids[~mask]]).abs().max()) > 1e-6
        sub_short = scores(model, cut.x, cut.edge_index)
        worst_short = max(worst_short, float((sub_short[cut.target_edge_mask]
                                              - full[cut.edge_ids[cut.target_edge_mask]])
                                             .abs().max()))
    assert worst_short > 1e-6                  # hops = n_graph_iters is one hop short


def test_training_loss_counts_only_target_edges() -> None:
    data = random_graph(2, 200, 500)
    torch.manual_seed(0)
    module = GNNModule(InteractionGNN(3, hidden=8, n_graph_iters=1, n_mlp_layers=1),
                       graph_ops="csr", signal_weight=3.0)
    record = sample_subgraphs(data, [torch.tensor([5, 6, 7])], hops=2)[0]
    mask = record.target_edge_mask
    assert 0 < int(mask.sum()) < mask.numel()
    logits = module(record)
    weights = edge_weights(record.y, record.signal, 3.0, 1.0, 1.0)
    expected = weighted_bce(logits[mask], record.y[mask], weights[mask])
    loss = module.training_step(record, 0)
    assert torch.allclose(loss, expected)
    assert not torch.allclose(loss, weighted_bce(logits, record.y, weights))
    del record.target_edge_mask                 # a full event graph: every edge counts
    assert torch.allclose(module.training_step(record, 0), weighted_bce(logits, record.y,
                                                                         weights))
