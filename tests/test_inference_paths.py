"""Inference paths: precision fp32 | bf16 for every learned stage (trkx.runtime.precision), GNN
scoring without isolated nodes."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from trkx.config import ConfigError
from trkx.data.record_type import Record
from trkx.embedding.inference import embed
from trkx.embedding.model import EmbeddingMLP
from trkx.filter.inference import score_edges as score_filter_edges
from trkx.filter.model import FilterMLP
from trkx.gnn.inference import score_edges
from trkx.gnn.model import InteractionGNN
from trkx.pipeline.config import load_pipeline_config
from trkx.runtime import precision

REPO = Path(__file__).resolve().parents[1]


def test_unknown_and_removed_precisions_are_refused() -> None:
    assert precision.check_precision("fp32") == "fp32"
    assert precision.check_precision("bf16") == "bf16"
    with pytest.raises(ValueError, match="precision must be one of fp32, bf16, not 'half'"):
        precision.check_precision("half")
    # auto timed the host CPU: the same checkpoints gave different tracks on another machine
    with pytest.raises(ValueError, match=r"'auto' was removed in trkx 0\.2\.0.*use fp32 or bf16"):
        precision.check_precision("auto")


def test_dense_precision_casts_linear_layers_only_under_bf16() -> None:
    layer = nn.Linear(4, 3)
    x = torch.randn(5, 4)
    with precision.dense_precision("bf16"):
        assert layer(x).dtype == torch.bfloat16
    with precision.dense_precision("fp32"):
        assert layer(x).dtype == torch.float32
    with pytest.raises(ValueError, match="precision must be one of"):
        with precision.dense_precision("half"):
            pass


def test_stages_return_float32_close_to_fp32_under_bf16() -> None:
    torch.manual_seed(0)
    network = EmbeddingMLP(in_features=3, hidden=16, layers=2, embedding_dim=4)
    x = torch.rand(50, 3) + 0.1
    exact, rounded = embed(network, x, precision="fp32"), embed(network, x, precision="bf16")
    assert rounded.dtype == torch.float32
    assert not torch.equal(exact, rounded)                 # bf16 really ran
    torch.testing.assert_close(rounded, exact, atol=0.05, rtol=0)

    edges = torch.randint(0, 50, (2, 120))
    record = Record(x=x, pos=x * torch.tensor([1000.0, torch.pi, 1000.0]), edge_index=edges)
    network = FilterMLP(3, hidden=16, layers=2)
    exact = score_filter_edges(network, record, precision="fp32")
    rounded = score_filter_edges(network, record, precision="bf16")
    assert rounded.dtype == torch.float32 and not torch.equal(exact, rounded)
    torch.testing.assert_close(rounded, exact, atol=0.05, rtol=0)

    model = InteractionGNN(node_features=3, hidden=8, n_graph_iters=2)
    exact = score_edges(model, x, edges, "csr", precision="fp32")
    rounded = score_edges(model, x, edges, "csr", precision="bf16")
    assert rounded.dtype == torch.float32 and not torch.equal(exact, rounded)
    torch.testing.assert_close(rounded, exact, atol=0.05, rtol=0)


def test_pipeline_config_names_a_bad_precision() -> None:
    with pytest.raises(ConfigError, match=r"inference.*precision must be one of.*'half'"):
        load_pipeline_config(REPO / "configs" / "quickstart.yaml", ["inference.precision=half"])


def test_gnn_scores_ignore_nodes_without_edges() -> None:
    from trkx.gnn.inference import drop_isolated_nodes

    torch.manual_seed(1)
    model = InteractionGNN(node_features=3, hidden=8, n_graph_iters=2, edge_features=5)
    x = torch.rand(40, 3)
    edges = torch.randint(0, 20, (2, 60))            # nodes 20..39 (and some below) unused
    attr = torch.rand(60, 5)
    kept_x, kept_edges = drop_isolated_nodes(x, edges)
    assert len(kept_x) == len(torch.unique(edges)) < 40
    assert torch.equal(kept_x[kept_edges], x[edges])          # same hits at both ends
    with torch.inference_mode():
        from trkx.gnn.ops_factory import build_graph_ops
        whole = torch.sigmoid(model(x, build_graph_ops(edges, 40, "csr"), attr))
    scored = score_edges(model, x, edges, "csr", precision="fp32", edge_attr=attr)
    torch.testing.assert_close(scored, whole, atol=1e-6, rtol=0)
