"""The along-beam shift (trkx.edges.augment): an event moved by dz keeps every hit difference,
moves each edge's beam-line intercept by dz, leaves the minibatch it came from as it was, and
reaches the GNN's and the filter's losses through ``module.z_shift_sigma`` (the GNN's refused
graph-parallel)."""

from __future__ import annotations

import pytest
import torch

from trkx.edges.augment import random_shift, shifted_along_beam
from trkx.edges.loss import edge_weights, weighted_bce
from trkx.gnn.edge_inputs import EDGE_INPUT_NAMES, edge_inputs
from trkx.gnn.model import InteractionGNN
from trkx.gnn.module import GNNModule
from trkx.gnn.sampling.sampler import sample_subgraphs

from .test_sampling import random_graph

pytestmark = pytest.mark.usefixtures("one_thread")


def _detector_like(data):
    """Hits at tracker radii and |z| < 1 m, so no trajectory input sits at its clip."""
    generator = torch.Generator().manual_seed(11)
    n = data.num_nodes
    data.pos = torch.stack([30 + 970 * torch.rand(n, generator=generator),
                            torch.pi * (2 * torch.rand(n, generator=generator) - 1),
                            400 * (2 * torch.rand(n, generator=generator) - 1)], dim=1)
    data.x = torch.cat([data.pos / torch.tensor([1000.0, torch.pi, 1000.0]),
                        data.x[:, 3:]], dim=1)
    data.scores = torch.rand(data.edge_index.shape[1], generator=generator)
    return data


def test_a_shifted_event_keeps_hit_differences_and_moves_z0_by_the_shift() -> None:
    data = _detector_like(random_graph(5, 300, 800))
    before_pos, before_x = data.pos.clone(), data.x.clone()
    moved = shifted_along_beam(data, 120.0)
    assert torch.equal(data.pos, before_pos) and torch.equal(data.x, before_x)   # untouched
    torch.testing.assert_close(moved.pos[:, 2] - data.pos[:, 2], torch.full((300,), 120.0))
    torch.testing.assert_close(moved.x[:, 2] - data.x[:, 2], torch.full((300,), 0.12))
    assert torch.equal(moved.x[:, [0, 1]], data.x[:, [0, 1]])
    assert moved.edge_index is data.edge_index and torch.equal(moved.y, data.y)
    a, b = edge_inputs(data, width=8), edge_inputs(moved, width=8)
    column = EDGE_INPUT_NAMES.index
    for name in ("dr", "dphi", "dz", "filter_score", "phislope", "rphislope"):
        torch.testing.assert_close(a[:, column(name)], b[:, column(name)], atol=1e-5, rtol=0)
    unclipped = a[:, column("z0")].abs() < 0.8
    assert unclipped.float().mean() > 0.3
    torch.testing.assert_close(b[unclipped, column("z0")] - a[unclipped, column("z0")],
                               torch.full((int(unclipped.sum()),), 0.12), atol=1e-4, rtol=0)
    assert not torch.allclose(a[:, column("deta")], b[:, column("deta")])   # seen from z = 0


def test_the_module_trains_on_the_shifted_minibatch_and_refuses_it_graph_parallel() -> None:
    from trkx.config import ConfigError
    from trkx.gnn.distributed.train import check_config

    data = _detector_like(random_graph(5, 300, 800))
    record = sample_subgraphs(data, [torch.tensor([3, 50, 77, 120, 200])], hops=2)[0]
    model = InteractionGNN(3, hidden=8, n_graph_iters=1, n_mlp_layers=1, edge_features=8)
    module = GNNModule(model, graph_ops="csr", signal_weight=1.0, true_weight=0.0,
                       fake_weight=0.1, z_shift_sigma=80.0)
    mask = record.target_edge_mask
    weights = edge_weights(record.y, record.signal, 1.0, 0.0, 0.1)[mask]
    torch.manual_seed(5)
    loss = module.training_step(record, 0)
    torch.manual_seed(5)
    moved = random_shift(record, 80.0)
    shift = float(moved.pos[0, 2] - record.pos[0, 2])
    assert 1.0 < abs(shift) < 400.0
    torch.testing.assert_close(loss, weighted_bce(module(moved)[mask], record.y[mask], weights))
    assert not torch.allclose(loss, weighted_bce(module(record)[mask], record.y[mask], weights))
    assert random_shift(record, 0.0) is record
    with pytest.raises(ValueError, match="z_shift_sigma"):
        GNNModule(model, z_shift_sigma=-1.0)
    with pytest.raises(ConfigError, match="z_shift_sigma"):
        check_config({"module": {"graph_ops": "csr", "z_shift_sigma": 50.0}}, "gnn.yaml")


def test_the_filter_trains_on_the_shifted_event() -> None:
    from trkx.filter.features import edge_features
    from trkx.filter.model import FilterMLP
    from trkx.filter.module import FilterModule

    data = _detector_like(random_graph(5, 300, 800))
    data.x = data.x[:, :3]
    network = FilterMLP(3, cell_agreement=False, hidden=8, layers=1, trajectory=True)
    module = FilterModule(network, edge_batch=10_000, signal_weight=1.0, z_shift_sigma=80.0)
    torch.manual_seed(5)
    loss = module.training_step(data, 0)
    torch.manual_seed(5)
    moved = random_shift(data, 80.0)
    assert 1.0 < abs(float(moved.pos[0, 2] - data.pos[0, 2])) < 400.0
    torch.testing.assert_close(loss, module.edge_loss(moved))       # every edge: no batch drawn
    assert not torch.allclose(loss, module.edge_loss(data))
    # the trajectory's z0 moves with the event, the hit differences do not
    a = edge_features(data.x, data.pos, data.edge_index, None, 3, True)
    b = edge_features(moved.x, moved.pos, moved.edge_index, None, 3, True)
    assert not torch.allclose(a, b)
    with pytest.raises(ValueError, match="z_shift_sigma"):
        FilterModule(network, z_shift_sigma=-1.0)


def test_the_embedding_trains_on_the_shifted_event() -> None:
    """``module.z_shift_sigma`` of the embedding: its training loss is the loss of the event
    moved along the beam (hit z in ``pos`` and in the model's input), drawn from torch's seeded
    generator, and not the unmoved event's."""
    import numpy as np

    from trkx.data.record_type import Record
    from trkx.embedding.model import EmbeddingMLP
    from trkx.embedding.module import EmbeddingModule

    generator = torch.Generator().manual_seed(3)
    n = 200
    pos = torch.stack([torch.rand(n, generator=generator) * 900 + 30,
                       torch.rand(n, generator=generator) * 6.2 - 3.1,
                       torch.randn(n, generator=generator) * 300], 1)
    record = Record(x=pos / torch.tensor([1000.0, torch.pi, 1000.0]), pos=pos,
                  particle_id=torch.randint(0, 20, (n,), generator=generator),
                  signal_hit=torch.rand(n, generator=generator) < 0.8,
                  track_edges=torch.randint(0, n, (2, 300), generator=generator))
    torch.manual_seed(0)
    module = EmbeddingModule(EmbeddingMLP(3, hidden=8, layers=1, embedding_dim=4),
                             train_sectors=1, z_shift_sigma=80.0)
    torch.manual_seed(9)
    module._rng = np.random.default_rng(1)
    loss = module.training_step(record, 0)
    torch.manual_seed(9)
    moved = random_shift(record, 80.0)
    assert 1.0 < abs(float(moved.pos[0, 2] - record.pos[0, 2])) < 400.0
    module._rng = np.random.default_rng(1)
    torch.testing.assert_close(loss, module.event_loss(moved))
    module._rng = np.random.default_rng(1)
    assert not torch.allclose(loss, module.event_loss(record))
    with pytest.raises(ValueError, match="z_shift_sigma"):
        EmbeddingModule(EmbeddingMLP(3, hidden=8, layers=1, embedding_dim=4), z_shift_sigma=-1)
