"""InteractionGNN equals the same network written with PyG MessagePassing."""

from __future__ import annotations

import pytest
import torch

from tests.reference.pyg_interaction_gnn import PygInteractionGNN
from trkx.gnn.model import InteractionGNN
from trkx.gnn.ops_factory import build_graph_ops

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.parametrize("kind", ["csr", "scatter"])
@pytest.mark.parametrize(("seed", "node_side", "aggregation"),
                         [(0, True, "sum"), (1, True, "sum"), (2, False, "sum"),
                          (3, True, "mean"), (4, False, "mean")])
def test_model_equals_pyg_message_passing_reference(kind: str, seed: int, node_side: bool,
                                                    aggregation: str) -> None:
    generator = torch.Generator().manual_seed(seed)
    num_nodes, num_edges = 70 + 20 * seed, 400
    edge_index = torch.randint(0, num_nodes, (2, num_edges), generator=generator)
    x = torch.randn(num_nodes, 6, dtype=torch.float64, generator=generator)
    torch.manual_seed(seed)
    model = InteractionGNN(6, hidden=16, n_graph_iters=3, activation="silu",
                           node_side_projection=node_side, aggregation=aggregation).double()
    reference = PygInteractionGNN(6, hidden=16, n_graph_iters=3, activation="silu",
                                  aggregation=aggregation).double()
    reference.load_state_dict(model.state_dict())

    out = model(x, build_graph_ops(edge_index, num_nodes, kind))
    expected = reference(x, edge_index)
    torch.testing.assert_close(out, expected)
    out.square().sum().backward()
    expected.square().sum().backward()
    for (name, p), q in zip(model.named_parameters(), reference.parameters()):
        torch.testing.assert_close(p.grad, q.grad, msg=lambda m, name=name: f"{name}: {m}")


def test_activation_checkpointing_gives_the_same_gradients() -> None:
    edge_index = torch.randint(0, 50, (2, 200), generator=torch.Generator().manual_seed(3))
    x = torch.randn(50, 4, dtype=torch.float64)
    torch.manual_seed(0)
    plain = InteractionGNN(4, hidden=8, n_graph_iters=2).double()
    checkpointed = InteractionGNN(4, hidden=8, n_graph_iters=2,
                                  checkpoint_iterations=True).double()
    checkpointed.load_state_dict(plain.state_dict())
    ops = build_graph_ops(edge_index, 50, "csr")
    plain(x, ops).sum().backward()
    checkpointed(x, ops).sum().backward()
    for p, q in zip(plain.parameters(), checkpointed.parameters()):
        torch.testing.assert_close(p.grad, q.grad)


def test_model_rejects_inputs_that_do_not_fit_the_graph() -> None:
    model = InteractionGNN(3, hidden=4, n_graph_iters=1)
    ops = build_graph_ops(torch.tensor([[0, 1], [1, 2]]), 3, "csr")
    with pytest.raises(ValueError, match=r"\[N, >= 3\]"):
        model(torch.randn(3, 2), ops)
    wide = torch.randn(3, 5)     # more columns (cluster shapes): the leading 3 are read
    model.eval()
    with torch.no_grad():
        assert torch.equal(model(wide, ops), model(wide[:, :3].clone(), ops))
    with pytest.raises(ValueError, match="4 rows but the graph has 3 nodes"):
        model(torch.randn(4, 3), ops)


def test_flop_count_matches_layer_sizes() -> None:
    model = InteractionGNN(3, hidden=4, n_graph_iters=1, n_mlp_layers=1)
    per_edge, per_node = model.flops_per_edge_and_node()
    # Edge MLPs: first Linear's node blocks (2h -> out) run per node, the rest per edge.
    # edge encoder [8->4, 4->4]: edge 4*4, node 8*4; edge net [12->4, 4->4]: edge 4*4 + 4*4,
    # node 8*4; classifier [12->4, 4->1]: edge 4*4 + 4*1, node 8*4; node encoder 3*4 + 4*4,
    # node net 12*4 + 4*4.
    assert per_edge == 2 * (4 * 4 + 4 * 4 + 4 * 4 + 4 * 4 + 4 * 1)
    assert per_node == 2 * (8 * 4 * 3 + 3 * 4 + 4 * 4 + 12 * 4 + 4 * 4)
    plain = InteractionGNN(3, hidden=4, n_graph_iters=1, n_mlp_layers=1,
                           node_side_projection=False)
    assert plain.flops_per_edge_and_node() == (per_edge + 2 * 8 * 4 * 3,
                                               2 * (3 * 4 + 4 * 4 + 12 * 4 + 4 * 4))


def test_edge_inputs_reach_the_output_the_same_way_in_both_projections() -> None:
    generator = torch.Generator().manual_seed(5)
    edge_index = torch.randint(0, 40, (2, 150), generator=generator)
    x = torch.randn(40, 4, dtype=torch.float64, generator=generator)
    attr = torch.randn(150, 5, dtype=torch.float64, generator=generator)
    torch.manual_seed(0)
    projected = InteractionGNN(4, hidden=8, n_graph_iters=2, edge_features=5).double()
    plain = InteractionGNN(4, hidden=8, n_graph_iters=2, edge_features=5,
                           node_side_projection=False).double()
    plain.load_state_dict(projected.state_dict())
    ops = build_graph_ops(edge_index, 40, "csr")
    out = projected(x, ops, attr)
    torch.testing.assert_close(out, plain(x, ops, attr))
    out.sum().backward()
    plain(x, ops, attr).sum().backward()
    for p, q in zip(projected.parameters(), plain.parameters()):
        torch.testing.assert_close(p.grad, q.grad)
    changed = attr.clone()
    changed[:, 4] += 1.0   # the filter-score column
    assert not torch.allclose(projected(x, ops, changed), out)
    with pytest.raises(ValueError, match=r"edge inputs of shape \[E, 5\]"):
        projected(x, ops)
