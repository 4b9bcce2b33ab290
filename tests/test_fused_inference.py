"""The fused CPU inference of the filter and the GNN (trkx.runtime.fused_mlp) gives the plain
modules' scores to float32 rounding, on every path a model can take: a chain with a final
Linear to one output (the filter, the GNN's classifier), an edge MLP with and without edge
inputs, the edge residual, the node nets, blocks that end mid-way, and a chain it cannot fuse
(another activation), which runs the plain modules."""

import pytest
import torch
from torch import nn

import trkx.filter.model as filter_model
import trkx.gnn.model as gnn_model
from trkx.filter.model import FilterMLP
from trkx.gnn.local_ops import CsrGraphOps
from trkx.gnn.model import InteractionGNN
from trkx.runtime import fused_mlp
from trkx.runtime.fused_mlp import fused_inference, fused_precision, plan

pytest.importorskip("numba")


def _randomise_norms(model: nn.Module, generator: torch.Generator) -> None:
    """Trained-like LayerNorm parameters (not the 1 / 0 of a fresh module)."""
    for module in model.modules():
        if isinstance(module, nn.LayerNorm):
            module.weight.data = torch.rand(module.weight.shape, generator=generator) + 0.5
            module.bias.data = torch.rand(module.bias.shape, generator=generator) - 0.5


def test_filter_fused_matches_plain(monkeypatch):
    generator = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    net = FilterMLP(3, hidden=32, layers=3, trajectory=True).eval()
    _randomise_norms(net, generator)
    features = torch.randn(1000, net.in_features, generator=generator)
    plain = net.net(features).squeeze(-1)
    monkeypatch.setattr(filter_model, "INFERENCE_BLOCK_ROWS", 384)   # the last block: 232 rows
    calls = []
    original = FilterMLP._forward_fused

    def counted(self, fused, rows):
        calls.append(1)
        return original(self, fused, rows)

    monkeypatch.setattr(FilterMLP, "_forward_fused", counted)
    with torch.no_grad():
        fused = net(features)
    assert calls, "the fused path did not run"
    assert torch.allclose(fused, plain, rtol=0, atol=2e-5)


@pytest.mark.parametrize("edge_features", [0, 10])
@pytest.mark.parametrize("n_mlp_layers", [1, 2])
def test_gnn_fused_matches_plain(monkeypatch, edge_features, n_mlp_layers):
    generator = torch.Generator().manual_seed(1)
    torch.manual_seed(1)
    model = InteractionGNN(5, hidden=16, n_graph_iters=3, edge_features=edge_features,
                           n_mlp_layers=n_mlp_layers, aggregation="mean").eval()
    _randomise_norms(model, generator)
    x = torch.randn(60, 5, generator=generator)
    edge_index = torch.randint(0, 60, (2, 500), generator=generator)
    attr = torch.randn(500, edge_features, generator=generator) if edge_features else None
    ops = CsrGraphOps(edge_index, 60)
    with torch.no_grad():
        monkeypatch.setattr(gnn_model, "_row_blocked", lambda ops, projection: False)
        plain = model(x, ops, attr)
        monkeypatch.undo()
        monkeypatch.setattr(gnn_model, "INFERENCE_BLOCK_ROWS", 96)    # blocks ending mid-way
        calls = []
        original = gnn_model._edge_mlp_fused

        def counted(*args):
            calls.append(1)
            return original(*args)

        monkeypatch.setattr(gnn_model, "_edge_mlp_fused", counted)
        fused = model(x, ops, attr)
        with fused_inference(False):
            blocked = model(x, ops, attr)
    assert len(calls) == 2 + model.n_graph_iters         # encoder, edge nets, classifier
    assert torch.equal(blocked, plain)
    assert torch.allclose(fused, plain, rtol=0, atol=1e-4)


def test_plan_reads_chains_and_refuses_others():
    chain = nn.Sequential(nn.Linear(4, 8), nn.LayerNorm(8), nn.ReLU(), nn.Linear(8, 1))
    fused = plan(chain)
    assert fused is not None and len(fused.layers) == 1 and fused.head is not None
    assert plan(nn.Sequential(nn.Linear(4, 8), nn.LayerNorm(8), nn.Tanh())) is None
    assert plan(nn.Sequential(nn.Linear(4, 8), nn.ReLU())) is None             # no norm
    assert plan(nn.Sequential(nn.Linear(4, 8), nn.LayerNorm(8), nn.ReLU(),
                              nn.Linear(8, 2))) is None                          # 2 outputs
    assert plan(chain.double()) is None


def test_unfusable_gnn_runs_plain_modules():
    torch.manual_seed(2)
    model = InteractionGNN(3, hidden=8, n_graph_iters=2, activation="tanh").eval()
    x = torch.randn(20, 3)
    ops = CsrGraphOps(torch.randint(0, 20, (2, 80)), 20)
    with torch.no_grad():
        with fused_inference(False):
            plain = model(x, ops)
        assert torch.equal(model(x, ops), plain)


def test_switch_and_autocast():
    assert fused_precision() == "fp32"
    with fused_inference(False):
        assert fused_precision() is None
        with fused_inference(True):
            assert fused_precision() == "fp32"
        assert fused_precision() is None
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert fused_precision() == "bf16"
        with fused_inference(False):
            assert fused_precision() is None
    with torch.autocast("cpu", dtype=torch.float16):
        assert fused_precision() is None                # no fused float16: the plain modules
    assert fused_mlp._ENABLED


def test_bf16_fused_matches_bf16_plain_modules(monkeypatch):
    """Under the bf16 precision the fused products run in bfloat16: the filter's logits and
    the GNN's agree with the plain modules under autocast to bf16 rounding, and both stay
    near the float32 ones."""
    generator = torch.Generator().manual_seed(5)
    torch.manual_seed(5)
    net = FilterMLP(3, hidden=32, layers=3, trajectory=True).eval()
    _randomise_norms(net, generator)
    features = torch.randn(700, net.in_features, generator=generator)
    monkeypatch.setattr(filter_model, "INFERENCE_BLOCK_ROWS", 256)
    model = InteractionGNN(5, hidden=16, n_graph_iters=2, edge_features=4).eval()
    _randomise_norms(model, generator)
    x = torch.randn(60, 5, generator=generator)
    ops = CsrGraphOps(torch.randint(0, 60, (2, 400), generator=generator), 60)
    attr = torch.randn(400, 4, generator=generator)
    monkeypatch.setattr(gnn_model, "INFERENCE_BLOCK_ROWS", 96)
    with torch.no_grad():
        exact_filter, exact_gnn = net(features), model(x, ops, attr)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            fused_filter, fused_gnn = net(features).float(), model(x, ops, attr).float()
            with fused_inference(False):
                plain_filter, plain_gnn = net(features).float(), model(x, ops, attr).float()
    for fused, plain, exact in ((fused_filter, plain_filter, exact_filter),
                                (fused_gnn, plain_gnn, exact_gnn)):
        assert not torch.equal(fused, exact)                   # bf16 products ran
        assert (fused - plain).abs().max() < 0.1
        assert (fused - exact).abs().max() < 0.1
        assert torch.corrcoef(torch.stack([fused, exact]))[0, 1] > 0.999
