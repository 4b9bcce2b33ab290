"""The pT-weighted signal loss: w = signal_weight * min(pT, cap)^power on signal edges, with the
pT of each edge's first hit carried through the minibatch sampler."""

from __future__ import annotations

import pytest
import torch

from trkx.edges.loss import edge_weights, weighted_bce
from trkx.gnn.model import InteractionGNN
from trkx.gnn.module import GNNModule
from trkx.gnn.sampling.sampler import sample_subgraphs

from .test_sampling import random_graph

pytestmark = pytest.mark.usefixtures("one_thread")


def test_signal_weight_grows_with_pt_up_to_the_cap() -> None:
    y = torch.tensor([True, True, True, True, False])
    signal = torch.tensor([True, True, True, False, False])
    pt = torch.tensor([1.0, 2.5, 40.0, 9.0, 9.0])
    weights = edge_weights(y, signal, 2.0, 0.5, 0.1, pt, pt_power=1.0, pt_cap=10.0)
    assert weights.tolist() == pytest.approx([2.0, 5.0, 20.0, 0.5, 0.1])
    squared = edge_weights(y, signal, 2.0, 0.5, 0.1, pt, pt_power=2.0, pt_cap=4.0)
    assert squared.tolist() == pytest.approx([2.0, 12.5, 32.0, 0.5, 0.1])
    assert edge_weights(y, signal, 2.0, 0.5, 0.1).tolist() == pytest.approx(
        [2.0, 2.0, 2.0, 0.5, 0.1])                      # power 0: the class weights
    with pytest.raises(ValueError, match="pT"):
        edge_weights(y, signal, 2.0, 0.5, 0.1, None, pt_power=1.0)


def test_sampled_minibatch_loss_weighs_signal_edges_by_their_first_hit_pt() -> None:
    data = random_graph(5, 300, 800)
    data.pt = 0.5 + 8.0 * torch.rand(300, generator=torch.Generator().manual_seed(1))
    torch.manual_seed(0)
    module = GNNModule(InteractionGNN(3, hidden=8, n_graph_iters=1, n_mlp_layers=1),
                       graph_ops="csr", signal_weight=3.0, true_weight=0.0, fake_weight=0.1,
                       signal_pt_power=1.0, signal_pt_cap=4.0)
    record = sample_subgraphs(data, [torch.tensor([3, 50, 77, 120])], hops=2)[0]
    mask = record.target_edge_mask
    assert bool((record.signal & mask).any())
    assert torch.equal(record.pt, data.pt[record.node_ids])
    # the whole event's pT of each sampled edge's first hit, not the minibatch's node order
    first_hit_pt = data.pt[data.edge_index[0, record.edge_ids]]
    expected_weights = edge_weights(record.y, record.signal, 3.0, 0.0, 0.1)
    expected_weights[record.signal] = 3.0 * first_hit_pt[record.signal].clamp(max=4.0)
    logits = module(record)
    expected = weighted_bce(logits[mask], record.y[mask], expected_weights[mask])
    loss = module.training_step(record, 0)
    assert torch.allclose(loss, expected)
    plain = weighted_bce(logits[mask], record.y[mask],
                         edge_weights(record.y, record.signal, 3.0, 0.0, 0.1)[mask])
    assert not torch.allclose(loss, plain)


def test_pt_weighting_refuses_graphs_without_truth_pt() -> None:
    data = random_graph(2, 100, 300)
    module = GNNModule(InteractionGNN(3, hidden=8, n_graph_iters=1, n_mlp_layers=1),
                       graph_ops="csr", signal_pt_power=1.0)
    with pytest.raises(ValueError, match="signal_pt_power"):
        module.training_step(data, 0)
    with pytest.raises(ValueError, match="signal_pt_power"):
        GNNModule(InteractionGNN(3, hidden=8, n_graph_iters=1, n_mlp_layers=1),
                  signal_pt_power=-1.0)
    with pytest.raises(ValueError, match="signal_pt_cap"):
        GNNModule(InteractionGNN(3, hidden=8, n_graph_iters=1, n_mlp_layers=1),
                  signal_pt_power=1.0, signal_pt_cap=0.5)
