"""Row blocks shared between worker threads (trkx.runtime.block_threads): every block once, in
the caller's grad / inference / autocast modes, the torch thread count restored; and the fused
filter and GNN give the same scores, bit for bit, whether one thread or two run the blocks."""

import pytest
import torch

import trkx.filter.model as filter_model
import trkx.gnn.model as gnn_model
from trkx.filter.model import FilterMLP
from trkx.gnn.local_ops import CsrGraphOps
from trkx.gnn.model import InteractionGNN
from trkx.runtime.block_threads import for_blocks


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_every_block_once_in_the_callers_modes(threads):
    seen: list[tuple[int, int, int, bool, bool, bool]] = []
    before = torch.get_num_threads()

    def work(start, stop, worker):
        seen.append((start, stop, worker, torch.is_inference_mode_enabled(),
                     torch.is_grad_enabled(), torch.is_autocast_enabled("cpu")))

    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
        for_blocks(1000, 96, work, threads)
    assert sorted((s, t) for s, t, *_ in seen) == [(s, min(s + 96, 1000))
                                                  for s in range(0, 1000, 96)]
    assert {w for _, _, w, *_ in seen} == set(range(threads))
    assert all(inference and not grad and autocast for *_, inference, grad, autocast in seen)
    assert torch.get_num_threads() == before


def test_an_error_in_a_block_reaches_the_caller():
    def work(start, stop, worker):
        if start == 200:
            raise ValueError("block 200")

    with pytest.raises(ValueError, match="block 200"):
        for_blocks(1000, 100, work, 2)


def _norms(model, generator):
    for module in model.modules():
        if isinstance(module, torch.nn.LayerNorm):
            module.weight.data = torch.rand(module.weight.shape, generator=generator) + 0.5
            module.bias.data = torch.rand(module.bias.shape, generator=generator) - 0.5


def test_fused_scores_do_not_depend_on_the_threads(monkeypatch):
    pytest.importorskip("numba")
    generator = torch.Generator().manual_seed(3)
    torch.manual_seed(3)
    gnn = InteractionGNN(5, hidden=16, n_graph_iters=2, edge_features=4).eval()
    net = FilterMLP(3, hidden=32, layers=3, trajectory=True).eval()
    _norms(gnn, generator), _norms(net, generator)
    x = torch.randn(300, 5, generator=generator)
    edge_index = torch.randint(0, 300, (2, 2000), generator=generator)
    attr = torch.randn(2000, 4, generator=generator)
    features = torch.randn(2000, net.in_features, generator=generator)
    monkeypatch.setattr(gnn_model, "INFERENCE_BLOCK_ROWS", 96)
    monkeypatch.setattr(filter_model, "INFERENCE_BLOCK_ROWS", 96)
    before = torch.get_num_threads()
    results = []
    try:
        for threads in (1, 2):
            torch.set_num_threads(threads)
            with torch.inference_mode():
                results.append((gnn(x, CsrGraphOps(edge_index, 300), attr), net(features)))
    finally:
        torch.set_num_threads(before)
    (gnn_one, filter_one), (gnn_two, filter_two) = results
    assert torch.equal(gnn_one, gnn_two)
    assert torch.equal(filter_one, filter_two)


def test_embedding_in_blocks_matches_the_whole_event(monkeypatch):
    import trkx.embedding.inference as embedding_inference
    from trkx.embedding.model import EmbeddingMLP

    torch.manual_seed(4)
    network = EmbeddingMLP(5, hidden=32, layers=3, embedding_dim=6).eval()
    x = torch.randn(1000, 5)
    monkeypatch.setattr(embedding_inference, "BLOCK_ROWS", 96)     # the last block: 40 rows
    blocks = []
    original = embedding_inference.for_blocks
    monkeypatch.setattr(embedding_inference, "for_blocks",
                        lambda rows, size, work: (blocks.append(size), original(rows, size, work)))
    blocked = embedding_inference.embed(network, x)
    assert blocks == [96], "the blocked path did not run"
    with torch.no_grad():
        whole = network(x)
    assert blocked.shape == (1000, 6)
    assert torch.allclose(blocked, whole, rtol=0, atol=1e-6)
