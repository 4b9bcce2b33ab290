"""The secondary weight of the edge loss: signal edges of particles produced beyond 1 mm weigh
``secondary_weight`` times more, with each edge's production radius carried through the
minibatch sampler; the graph-parallel path, which does not carry it, refuses it."""

from __future__ import annotations

import pytest
import torch

from trkx.edges.loss import edge_weights, weighted_bce
from trkx.gnn.model import InteractionGNN
from trkx.gnn.module import GNNModule
from trkx.gnn.sampling.sampler import sample_subgraphs

from .test_sampling import random_graph

pytestmark = pytest.mark.usefixtures("one_thread")


def test_secondary_signal_edges_weigh_more() -> None:
    y = torch.tensor([True, True, True, True, False])
    signal = torch.tensor([True, True, True, False, False])
    radius = torch.tensor([0.01, 1.0, 35.0, 80.0, 80.0])   # 1 mm is prompt
    pt = torch.tensor([2.0, 2.0, 2.0, 2.0, 2.0])
    weights = edge_weights(y, signal, 1.0, 0.5, 0.1, pt, 1.0, 10.0, radius, 5.0)
    assert weights.tolist() == pytest.approx([2.0, 2.0, 10.0, 0.5, 0.1])
    assert edge_weights(y, signal, 1.0, 0.5, 0.1, signal_radius=radius).tolist() == \
        pytest.approx([1.0, 1.0, 1.0, 0.5, 0.1])          # weight 1: off
    with pytest.raises(ValueError, match="production radius"):
        edge_weights(y, signal, 1.0, 0.5, 0.1, secondary_weight=3.0)


def test_sampled_minibatch_carries_the_production_radius() -> None:
    data = random_graph(5, 300, 800)
    generator = torch.Generator().manual_seed(2)
    data.production_radius = torch.where(torch.rand(300, generator=generator) < 0.5,
                                         torch.tensor(0.02), torch.tensor(60.0))
    module = GNNModule(InteractionGNN(3, hidden=8, n_graph_iters=1, n_mlp_layers=1),
                       graph_ops="csr", signal_weight=1.0, true_weight=0.0, fake_weight=0.1,
                       secondary_weight=4.0)
    record = sample_subgraphs(data, [torch.tensor([3, 50, 77, 120, 200])], hops=2)[0]
    mask = record.target_edge_mask
    assert torch.equal(record.production_radius, data.production_radius[record.node_ids])
    first = data.production_radius[data.edge_index[0, record.edge_ids]]
    expected = edge_weights(record.y, record.signal, 1.0, 0.0, 0.1)
    secondary = record.signal & (first > 1.0)
    assert bool((secondary & mask).any()) and bool((record.signal & ~secondary & mask).any())
    expected[secondary] *= 4.0
    logits = module(record)
    loss = module.training_step(record, 0)
    assert torch.allclose(loss, weighted_bce(logits[mask], record.y[mask], expected[mask]))


def test_the_secondary_weight_needs_the_radius_and_a_single_process() -> None:
    from trkx.config import ConfigError
    from trkx.gnn.distributed.train import check_config

    module = GNNModule(InteractionGNN(3, hidden=8, n_graph_iters=1, n_mlp_layers=1),
                       graph_ops="csr", secondary_weight=3.0)
    with pytest.raises(ValueError, match="secondary_weight"):
        module.training_step(random_graph(2, 100, 300), 0)
    with pytest.raises(ValueError, match="secondary_weight must be > 0"):
        GNNModule(InteractionGNN(3, hidden=8, n_graph_iters=1, n_mlp_layers=1),
                  secondary_weight=0.0)
    with pytest.raises(ConfigError, match="secondary_weight"):
        check_config({"module": {"graph_ops": "csr",
                                 "secondary_weight": 2.0}}, "gnn.yaml")


def test_the_filter_weighs_secondary_signal_edges() -> None:
    """The filter's loss: each signal edge whose first hit's particle was made beyond 1 mm
    weighs ``secondary_weight`` times its signal weight; without truth radii it refuses."""
    from trkx.data.record_type import Record
    from trkx.filter.features import edge_features
    from trkx.filter.model import FilterMLP
    from trkx.filter.module import FilterModule

    generator = torch.Generator().manual_seed(4)
    n, e = 60, 400
    pos = torch.stack([torch.rand(n, generator=generator) * 1000 + 30,
                       torch.rand(n, generator=generator) * 6 - 3,
                       torch.rand(n, generator=generator) * 2000 - 1000], 1)
    edge_index = torch.randint(0, n, (2, e), generator=generator)
    y = torch.rand(e, generator=generator) < 0.4
    record = Record(x=torch.randn(n, 3, generator=generator), pos=pos, edge_index=edge_index,
                  y=y, signal=y & (torch.rand(e, generator=generator) < 0.7),
                  production_radius=torch.where(torch.rand(n, generator=generator) < 0.3,
                                                torch.tensor(40.0), torch.tensor(0.05)))
    torch.manual_seed(0)
    network = FilterMLP(3, hidden=8, layers=1)
    module = FilterModule(network, signal_weight=2.0, secondary_weight=6.0)
    logits = network(edge_features(record.x, record.pos, edge_index, None, 3))
    expected = edge_weights(y, record.signal, 2.0, 1.0, 1.0)
    secondary = record.signal & (record.production_radius[edge_index[0]] > 1.0)
    assert bool(secondary.any()) and bool((record.signal & ~secondary).any())
    expected[secondary] *= 6.0
    torch.testing.assert_close(module.edge_loss(record), weighted_bce(logits, y, expected))
    plain = FilterModule(network, signal_weight=2.0).edge_loss(record)
    assert not torch.allclose(plain, module.edge_loss(record))
    del record.production_radius
    with pytest.raises(ValueError, match="production_radius"):
        module.edge_loss(record)
    with pytest.raises(ValueError, match="secondary_weight must be > 0"):
        FilterModule(network, secondary_weight=0.0)


def test_the_embedding_weighs_secondary_signal_pairs() -> None:
    """The embedding's hinge loss: a positive pair of signal hits of a particle made beyond
    1 mm weighs ``secondary_weight`` x ``signal_weight`` among the positives; other positives
    and the negatives keep their weights; the phi wedges of training carry the radii."""
    import numpy as np

    from trkx.data.record_type import Record
    from trkx.embedding.model import EmbeddingMLP
    from trkx.embedding.module import EmbeddingModule, phi_sector
    from trkx.embedding.pairs import hinge_loss, pair_labels

    particle = torch.tensor([1, 1, 2, 2, 3, 3, 0])
    signal_hit = torch.tensor([True, True, True, True, False, False, False])
    radius = torch.tensor([0.1, 0.1, 50.0, 50.0, 50.0, 50.0, 0.0])
    pairs = torch.tensor([[0, 2, 4, 0, 6], [1, 3, 5, 2, 1]])   # prompt, secondary, non-signal,
    positive, weight = pair_labels(pairs, particle, signal_hit, 3.0, radius, 5.0)  # neg, noise
    assert positive.tolist() == [True, True, True, False, False]
    assert weight.tolist() == pytest.approx([3.0, 15.0, 1.0, 1.0, 1.0])
    assert pair_labels(pairs, particle, signal_hit, 3.0)[1].tolist() == \
        pytest.approx([3.0, 3.0, 1.0, 1.0, 1.0])
    with pytest.raises(ValueError, match="production_radius"):
        pair_labels(pairs, particle, signal_hit, 3.0, None, 5.0)

    embedding = torch.tensor([[0.0, 0.0], [0.1, 0.0], [0.0, 0.5], [0.3, 0.5], [1.0, 1.0],
                              [1.0, 1.2], [0.05, 0.0]])
    d2 = (embedding[pairs[0]] - embedding[pairs[1]]).pow(2).sum(1)
    pull = (3.0 * d2[0] + 15.0 * d2[1] + 1.0 * d2[2]) / 19.0
    push = (torch.relu(0.1 - d2[3:].sqrt()) ** 2).sum() / 2
    torch.testing.assert_close(hinge_loss(embedding, pairs, positive, weight, 0.1), pull + push)

    generator = torch.Generator().manual_seed(3)
    n = 200
    record = Record(x=torch.randn(n, 3, generator=generator),
                  pos=torch.stack([torch.rand(n, generator=generator) * 900 + 30,
                                   torch.rand(n, generator=generator) * 6.2 - 3.1,
                                   torch.randn(n, generator=generator) * 500], 1),
                  particle_id=torch.randint(0, 20, (n,), generator=generator),
                  signal_hit=torch.rand(n, generator=generator) < 0.8,
                  production_radius=torch.rand(n, generator=generator) * 100,
                  track_edges=torch.randint(0, n, (2, 300), generator=generator))
    wedge = phi_sector(record, 4, np.random.default_rng(0))
    assert 0 < wedge.num_nodes < n
    inside = torch.isin(record.pos[:, 1], wedge.pos[:, 1])
    assert torch.equal(wedge.production_radius, record.production_radius[inside])
    module = EmbeddingModule(EmbeddingMLP(3, hidden=8, layers=1, embedding_dim=4),
                             secondary_weight=5.0)
    del record.production_radius
    with pytest.raises(ValueError, match="production_radius"):
        module.event_loss(record)
    with pytest.raises(ValueError, match="secondary_weight must be > 0"):
        EmbeddingModule(EmbeddingMLP(3, hidden=8, layers=1, embedding_dim=4),
                        secondary_weight=0.0)


def test_the_sampler_carries_each_hits_particle_hit_count() -> None:
    """The loss's signal (``signal_pt_min``: particles of >= 3 hits) reads each hit's particle
    hit count: a sampled subgraph carries its nodes' counts."""
    data = random_graph(5, 300, 800)
    generator = torch.Generator().manual_seed(3)
    data.nhits = torch.randint(3, 14, (300,), generator=generator)
    record = sample_subgraphs(data, [torch.tensor([3, 50, 77, 120, 200])], hops=2)[0]
    assert len(record.node_ids) > 5
    assert torch.equal(record.nhits, data.nhits[record.node_ids])


def test_the_loss_signal_threshold_counts_true_edges_of_lower_pt_as_signal() -> None:
    """``signal_pt_min``: the true edges of particles of pT >= it and >= 3 hits weigh as signal
    (the records' flag says pT >= 1 GeV); carried through the sampler; refused without the
    hits' truth and graph-parallel."""
    from trkx.config import ConfigError
    from trkx.gnn.distributed.train import check_config

    data = random_graph(5, 300, 800)
    generator = torch.Generator().manual_seed(4)
    data.pt = 0.85 + 0.3 * torch.rand(300, generator=generator)       # 0.85 - 1.15 GeV
    data.nhits = torch.randint(2, 9, (300,), generator=generator)
    module = GNNModule(InteractionGNN(3, hidden=8, n_graph_iters=1, n_mlp_layers=1),
                       graph_ops="csr", signal_weight=1.0, true_weight=0.0, fake_weight=0.1,
                       signal_pt_min=0.9)
    record = sample_subgraphs(data, [torch.tensor([3, 50, 77, 120, 200])], hops=2)[0]
    mask = record.target_edge_mask
    first = record.edge_index[0]
    wanted = record.y.bool() & (record.pt[first] >= 0.9) & (record.nhits[first] >= 3)
    assert bool((wanted & ~record.signal & mask).any())       # edges the records' flag leaves out
    assert bool((record.y.bool() & ~wanted & mask).any())     # and true edges below the threshold
    expected = edge_weights(record.y, wanted, 1.0, 0.0, 0.1)
    loss = module.training_step(record, 0)
    assert torch.allclose(loss, weighted_bce(module(record)[mask], record.y[mask],
                                             expected[mask]))
    plain = GNNModule(InteractionGNN(3, hidden=8, n_graph_iters=1, n_mlp_layers=1),
                      graph_ops="csr", signal_weight=1.0, true_weight=0.0, fake_weight=0.1)
    plain.load_state_dict(module.state_dict())
    assert not torch.allclose(plain.training_step(record, 0), loss)
    del data.nhits
    with pytest.raises(ValueError, match="signal_pt_min"):
        module.training_step(data, 0)
    with pytest.raises(ValueError, match="signal_pt_min must be > 0"):
        GNNModule(InteractionGNN(3, hidden=8, n_graph_iters=1, n_mlp_layers=1), signal_pt_min=0.0)
    with pytest.raises(ConfigError, match="signal_pt_min"):
        check_config({"module": {"graph_ops": "csr",
                                 "signal_pt_min": 0.9}}, "gnn.yaml")
