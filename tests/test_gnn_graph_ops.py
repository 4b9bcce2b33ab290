"""The CSR SpMM and index-scatter GraphOps compute the same products and gradients."""

from __future__ import annotations

import pytest
import torch

from trkx.gnn.graph_ops import GraphOps
from trkx.gnn.local_ops import CsrGraphOps, ScatterGraphOps, transposed_incidence_csr
from trkx.gnn.ops_factory import KernelChooser, build_graph_ops

pytestmark = pytest.mark.usefixtures("one_thread")


def random_graph(num_nodes: int, num_edges: int, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, num_nodes, (2, num_edges), generator=generator)


def dense_incidence(index: torch.Tensor, num_nodes: int) -> torch.Tensor:
    matrix = torch.zeros(index.numel(), num_nodes, dtype=torch.float64)
    matrix[torch.arange(index.numel()), index] = 1.0
    return matrix


@pytest.mark.parametrize("kind", ["csr", "scatter"])
def test_products_match_dense_incidence_matrices(kind: str) -> None:
    # Includes isolated nodes (N > touched nodes) and repeated edges.
    edge_index = torch.cat([random_graph(40, 150, seed=1), torch.tensor([[3, 3], [7, 7]])], 1)
    ops = build_graph_ops(edge_index, 60, kind)
    assert isinstance(ops, GraphOps)
    S, D = dense_incidence(edge_index[0], 60), dense_incidence(edge_index[1], 60)
    x = torch.randn(60, 5, dtype=torch.float64)
    e = torch.randn(edge_index.shape[1], 5, dtype=torch.float64)
    x_src, x_dst = ops.gather(x)
    m_in, m_out = ops.aggregate(e)
    torch.testing.assert_close(x_src, S @ x)
    torch.testing.assert_close(x_dst, D @ x)
    torch.testing.assert_close(m_in, D.T @ e)
    torch.testing.assert_close(m_out, S.T @ e)


def test_csr_and_scatter_agree_forward_and_gradients() -> None:
    edge_index = random_graph(200, 1200, seed=2)
    csr, scatter = CsrGraphOps(edge_index, 200), ScatterGraphOps(edge_index, 200)
    results = []
    for ops in (csr, scatter):
        torch.manual_seed(3)
        x = torch.randn(200, 7, dtype=torch.float64, requires_grad=True)
        e = torch.randn(1200, 7, dtype=torch.float64, requires_grad=True)
        x_src, x_dst = ops.gather(x)
        m_in, m_out = ops.aggregate(e * x_src + x_dst)
        generator = torch.Generator().manual_seed(4)
        weights = torch.randn(200, 7, dtype=torch.float64, generator=generator)
        loss = (weights * m_in).sum() + (weights.flip(0) * m_out ** 2).sum()
        loss.backward()
        results.append((x_src, x_dst, m_in, m_out, x.grad, e.grad))
    for a, b in zip(*results):
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize("kind", ["csr", "scatter"])
def test_gradcheck(kind: str) -> None:
    edge_index = random_graph(12, 40, seed=5)
    ops = build_graph_ops(edge_index, 12, kind)
    x = torch.randn(12, 3, dtype=torch.float64, requires_grad=True)
    e = torch.randn(40, 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: ops.gather(t), (x,))
    assert torch.autograd.gradcheck(lambda t: ops.aggregate(t), (e,))


def test_csr_sums_low_precision_input_in_float32() -> None:
    edge_index = random_graph(30, 100, seed=6)
    ops = CsrGraphOps(edge_index, 30)
    e = torch.randn(100, 4).to(torch.bfloat16).requires_grad_(True)
    m_in, _ = ops.aggregate(e)
    torch.testing.assert_close(m_in, ScatterGraphOps(edge_index, 30).aggregate(e.float())[0])
    m_in.sum().backward()
    assert e.grad is not None and e.grad.dtype == torch.bfloat16


def test_transposed_incidence_rows_list_edges_of_each_node() -> None:
    index = torch.tensor([2, 0, 2, 1])
    matrix = transposed_incidence_csr(index, 4, torch.float64).to_dense()
    expected = torch.tensor([[0, 1, 0, 0], [0, 0, 0, 1], [1, 0, 1, 0], [0, 0, 0, 0]],
                            dtype=torch.float64)
    torch.testing.assert_close(matrix, expected)


def test_auto_measures_once_per_size_class() -> None:
    chooser = KernelChooser(width=8, repeats=1)
    first = build_graph_ops(random_graph(100, 400, seed=7), 100, "auto", chooser)
    assert first.kind in ("csr", "scatter") and len(chooser.timings) == 1
    # Same size class (N, E within a factor ~1.4): reuses the decision without timing.
    second = build_graph_ops(random_graph(105, 410, seed=8), 105, "auto", chooser)
    assert second.kind == first.kind and len(chooser.timings) == 1
    build_graph_ops(random_graph(1000, 4000, seed=9), 1000, "auto", chooser)
    assert len(chooser.timings) == 2


def test_bad_graphs_and_kinds_are_named() -> None:
    with pytest.raises(ValueError, match="outside"):
        CsrGraphOps(torch.tensor([[0, 5], [1, 2]]), 5)
    with pytest.raises(ValueError, match=r"\[2, E\]"):
        ScatterGraphOps(torch.zeros(3, 4, dtype=torch.long), 5)
    with pytest.raises(ValueError, match="'dense'"):
        build_graph_ops(random_graph(5, 5, seed=0), 5, "dense")


def test_auto_decides_even_when_first_called_without_gradients() -> None:
    # Lightning's sanity check meets the first graph under inference_mode; the timing needs
    # gradients all the same, and the next (training) graph of that class reuses the choice.
    chooser = KernelChooser(width=4, repeats=1)
    with torch.inference_mode():
        first = build_graph_ops(random_graph(30, 90, seed=1), 30, "auto", chooser)
        first.aggregate(first.gather(torch.randn(30, 4))[0])
    assert len(chooser.timings) == 1
    ops = build_graph_ops(random_graph(30, 90, seed=2), 30, "auto", chooser)
    assert ops.kind == first.kind and len(chooser.timings) == 1
    x = torch.randn(30, 4, requires_grad=True)
    ops.aggregate(ops.gather(x)[0])[0].sum().backward()
    assert x.grad is not None


def test_csr_runs_under_bf16_autocast() -> None:
    edge_index = random_graph(30, 100, seed=6)
    e = torch.randn(100, 4)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        m_in, m_out = CsrGraphOps(edge_index, 30).aggregate(e)
    expected = ScatterGraphOps(edge_index, 30).aggregate(e)
    torch.testing.assert_close(m_in, expected[0])
    torch.testing.assert_close(m_out, expected[1])


def test_inference_chooser_times_the_forward_only(monkeypatch) -> None:
    from trkx.gnn import ops_factory

    seen = []
    original = ops_factory.time_graph_ops

    def spy(ops, width, repeats=2, dtype=torch.float32, device="cpu", backward=True):
        seen.append(backward)
        return original(ops, width, repeats, dtype, device, backward)

    monkeypatch.setattr(ops_factory, "time_graph_ops", spy)
    chooser = KernelChooser(width=4, repeats=1, backward=False)
    with torch.inference_mode():
        build_graph_ops(random_graph(30, 90, seed=3), 30, "auto", chooser)
    assert seen == [False, False] and len(chooser.timings) == 1
    KernelChooser(width=4, repeats=1).build(random_graph(30, 90, seed=3), 30)
    assert seen[2:] == [True, True]
