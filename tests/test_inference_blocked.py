"""The row-blocked, in-place inference paths of the filter and the GNN give the same bits as
the plain modules (the arithmetic of every element is unchanged; blocks are a multiple of
the BLAS row tile, as the shipped block sizes are); the fused paths (trkx.runtime.fused_mlp)
give them to float32 rounding."""

import torch

import trkx.filter.model as filter_model
import trkx.gnn.model as gnn_model
from trkx.filter.model import FilterMLP
from trkx.gnn.local_ops import CsrGraphOps, ScatterGraphOps
from trkx.gnn.model import InteractionGNN
from trkx.runtime.fused_mlp import fused_inference


def test_filter_blocked_equals_plain(monkeypatch):
    torch.manual_seed(0)
    net = FilterMLP(3, hidden=32, layers=3, trajectory=True).eval()
    features = torch.randn(1000, net.in_features)
    plain = net.net(features).squeeze(-1)
    monkeypatch.setattr(filter_model, "INFERENCE_BLOCK_ROWS", 120)
    with torch.no_grad(), fused_inference(False):
        assert torch.equal(net(features), plain)
        assert net(features[:0]).shape == (0,)


def test_gnn_blocked_equals_plain(monkeypatch):
    torch.manual_seed(1)
    model = InteractionGNN(5, hidden=16, n_graph_iters=3, edge_features=10).eval()
    x = torch.randn(60, 5)
    edge_index = torch.randint(0, 60, (2, 500))
    attr = torch.randn(500, 10)
    for ops_type in (CsrGraphOps, ScatterGraphOps):
        ops = ops_type(edge_index, 60)
        with torch.no_grad(), fused_inference(False):
            monkeypatch.setattr(gnn_model, "_row_blocked", lambda ops, projection: False)
            plain = model(x, ops, attr)
            monkeypatch.undo()
            monkeypatch.setattr(gnn_model, "INFERENCE_BLOCK_ROWS", 56)
            assert torch.equal(model(x, ops, attr), plain)
        monkeypatch.undo()
