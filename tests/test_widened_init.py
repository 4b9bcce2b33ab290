"""trainer.init_from into a network that reads more input columns (trkx.training.fit):
the widened network computes what the model file's did, and other mismatches are refused."""

from __future__ import annotations

import copy

import pytest
import torch

from trkx.gnn.local_ops import CsrGraphOps
from trkx.gnn.model import InteractionGNN
from trkx.training.fit import first_iterations, widened_weights


def test_a_gnn_given_more_node_columns_starts_as_the_narrower_one() -> None:
    torch.manual_seed(0)
    narrow = InteractionGNN(3, hidden=16, n_graph_iters=2, edge_features=2).double()
    wide = InteractionGNN(9, hidden=16, n_graph_iters=2, edge_features=2).double()
    weights, widened = widened_weights(narrow.state_dict(), wide.state_dict(),
                                       wide.leading_input_weights)
    wide.load_state_dict(weights)
    assert widened == ["node_encoder.0.weight"]
    x = torch.randn(30, 9, dtype=torch.float64)            # columns 4-9: anything
    edges = torch.randint(0, 30, (2, 80))
    edge_attr = torch.randn(80, 2, dtype=torch.float64)
    ops = CsrGraphOps(edges, 30)
    torch.testing.assert_close(wide(x, ops, edge_attr), narrow(x, ops, edge_attr))
    # and the new columns do learn: their weights get a gradient
    wide(x, ops, edge_attr).sum().backward()
    assert wide.node_encoder[0].weight.grad[:, 3:].abs().sum() > 0


def test_other_shape_changes_are_refused_with_the_key() -> None:
    small = InteractionGNN(3, hidden=16, n_graph_iters=2).state_dict()
    with pytest.raises(ValueError, match=r"has shape \(16, 3\) in the model file, \(24, 3\)"):
        widened_weights(small, InteractionGNN(3, hidden=24, n_graph_iters=2).state_dict())
    with pytest.raises(ValueError, match="differ in their keys"):
        widened_weights(small, InteractionGNN(3, hidden=16, n_graph_iters=3).state_dict())
    widenable = InteractionGNN.leading_input_weights
    narrower = InteractionGNN(2, hidden=16, n_graph_iters=2).state_dict()
    with pytest.raises(ValueError, match=r"node_encoder\.0\.weight"):  # fewer columns: no
        widened_weights(small, narrower, widenable)
    # the edge encoder reads [edge inputs, h_src, h_dst]: new edge inputs come FIRST, so
    # appending zero columns would misread h; it is refused, naming the key
    more_edges = InteractionGNN(3, hidden=16, n_graph_iters=2, edge_features=2).state_dict()
    with pytest.raises(ValueError, match=r"edge_encoder\.0\.weight has shape \(16, 32\)"):
        widened_weights(small, more_edges, widenable)
    # and without the network's list nothing is widened
    with pytest.raises(ValueError, match=r"node_encoder\.0\.weight"):
        widened_weights(small, InteractionGNN(9, hidden=16, n_graph_iters=2).state_dict())


@pytest.mark.parametrize("node_side_projection", [True, False])
def test_a_gnn_given_more_edge_inputs_starts_as_the_narrower_one(node_side_projection) -> None:
    """The edge encoder reads [edge inputs, h_src, h_dst]: the new edge-input columns go in
    before the node columns, at weight 0 (inner_input_weights), so 10 -> 12 edge inputs
    (the along-track agreement) computes the model file's logits whatever the new inputs hold."""
    torch.manual_seed(1)
    narrow = InteractionGNN(3, hidden=16, n_graph_iters=2, edge_features=10,
                            node_side_projection=node_side_projection).double()
    wide = InteractionGNN(3, hidden=16, n_graph_iters=2, edge_features=12,
                          node_side_projection=node_side_projection).double()
    assert wide.inner_input_weights() == {"edge_encoder.0.weight": 32}
    weights, widened = widened_weights(narrow.state_dict(), wide.state_dict(),
                                       wide.leading_input_weights, wide.inner_input_weights())
    wide.load_state_dict(weights)
    assert widened == ["edge_encoder.0.weight"]
    x = torch.randn(30, 3, dtype=torch.float64)
    edges = torch.randint(0, 30, (2, 80))
    ops = CsrGraphOps(edges, 30)
    attr = torch.randn(80, 12, dtype=torch.float64)
    torch.testing.assert_close(wide(x, ops, attr), narrow(x, ops, attr[:, :10]))
    wide(x, ops, attr).sum().backward()
    assert wide.edge_encoder[0].weight.grad[:, 10:12].abs().sum() > 0
    assert InteractionGNN(3, hidden=16, n_graph_iters=2).inner_input_weights() == {}


def test_a_shallower_gnn_starts_from_the_first_iterations_of_a_deeper_one() -> None:
    """trainer.init_from with fewer iterations (trkx.training.fit.first_iterations): the
    encoders, the first T iterations and the classifier are the model file's, so the network
    computes what the deeper one computes with its later iterations skipped."""
    torch.manual_seed(2)
    deep = InteractionGNN(3, hidden=16, n_graph_iters=3, edge_features=2).double()
    shallow = InteractionGNN(3, hidden=16, n_graph_iters=2, edge_features=2).double()
    state, dropped = first_iterations(deep.state_dict(), shallow.state_dict(),
                                      shallow.iteration_lists)
    assert dropped == [2]
    weights, widened = widened_weights(state, shallow.state_dict())
    shallow.load_state_dict(weights)
    assert widened == []
    skipped = copy.deepcopy(deep)
    skipped.edge_nets, skipped.node_nets = deep.edge_nets[:2], deep.node_nets[:2]
    skipped.n_graph_iters = 2
    x = torch.randn(30, 3, dtype=torch.float64)
    edges = torch.randint(0, 30, (2, 80))
    attr = torch.randn(80, 2, dtype=torch.float64)
    ops = CsrGraphOps(edges, 30)
    torch.testing.assert_close(shallow(x, ops, attr), skipped(x, ops, attr))
    assert not torch.allclose(shallow(x, ops, attr), deep(x, ops, attr))
    # a deeper target than the model file keeps every key: its missing ones are refused
    same, none = first_iterations(shallow.state_dict(), deep.state_dict(),
                                  deep.iteration_lists)
    assert none == [] and same.keys() == shallow.state_dict().keys()
    with pytest.raises(ValueError, match="differ in their keys"):
        widened_weights(same, deep.state_dict())
