"""Bulk subgraph sampling by sparse products equals a plain BFS, and fan-out sampling keeps its
contract (neighbours only, at most f per frontier hit, uniform, seeded)."""

from __future__ import annotations

import itertools

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.reference.bfs_sampling import bfs_nodes, bfs_subgraph, neighbour_lists
from trkx.data.record_type import Record
from trkx.gnn.sampling.datamodule import SampledMinibatches, SamplingConfig
from trkx.gnn.sampling.sampler import (
    expand,
    sample_rows,
    sample_subgraphs,
    symmetric_adjacency,
    target_matrix,
)

pytestmark = pytest.mark.usefixtures("one_thread")


def random_graph(seed: int, num_nodes: int, num_edges: int) -> Record:
    generator = torch.Generator().manual_seed(seed)
    edge_index = torch.randint(0, num_nodes, (2, num_edges), generator=generator)
    data = Record(x=torch.randn(num_nodes, 3, generator=generator), edge_index=edge_index,
                y=torch.rand(num_edges, generator=generator) < 0.5,
                signal=torch.rand(num_edges, generator=generator) < 0.2)
    data.num_nodes = num_nodes
    return data


def rows_of(matrix: torch.Tensor) -> list[set[int]]:
    dense = matrix.to_dense()
    return [set(torch.nonzero(row).flatten().tolist()) for row in dense]


@st.composite
def graphs_and_targets(draw):
    num_nodes = draw(st.integers(1, 25))
    num_edges = draw(st.integers(0, 40))   # sparse enough for isolated hits
    seed = draw(st.integers(0, 10_000))
    node = st.integers(0, num_nodes - 1)
    targets = draw(st.lists(st.lists(node, max_size=5, unique=True), min_size=1, max_size=4))
    hops = draw(st.integers(0, 4))
    return random_graph(seed, num_nodes, num_edges), targets, hops


@settings(max_examples=60, deadline=None)
@given(graphs_and_targets())
def test_bulk_sampling_equals_bfs(case) -> None:
    data, targets, hops = case
    records = sample_subgraphs(data, [torch.tensor(t, dtype=torch.long) for t in targets], hops)
    neighbours = neighbour_lists(data.edge_index, data.num_nodes)
    assert len(records) == len(targets)
    for target, record in zip(targets, records):
        nodes, edge_ids, touches = bfs_subgraph(neighbours, data.edge_index, target, hops)
        assert record.node_ids.tolist() == nodes.tolist()
        assert record.edge_ids.tolist() == edge_ids.tolist()
        assert record.target_edge_mask.tolist() == touches.tolist()
        # relabelled edges point at the same hits, and features / labels follow their ids
        assert torch.equal(record.node_ids[record.edge_index], data.edge_index[:, edge_ids])
        assert torch.equal(record.x, data.x[nodes])
        assert torch.equal(record.y, data.y[edge_ids])
        assert torch.equal(record.signal, data.signal[edge_ids])
        assert record.num_nodes == len(nodes)


def test_empty_frontiers_and_isolated_hits() -> None:
    # hits 0-1-2 form a path, 3 and 4 are isolated, 5 has a self-loop only
    data = Record(x=torch.arange(6.0).unsqueeze(1), edge_index=torch.tensor([[0, 1, 5], [1, 2, 5]]),
                y=torch.tensor([True, False, True]))
    data.num_nodes = 6
    frontiers = expand(symmetric_adjacency(data.edge_index, 6), target_matrix(
        [torch.tensor([0]), torch.tensor([3]), torch.tensor([5])], 6), hops=3)
    assert [rows_of(f) for f in frontiers] == [[{0}, {3}, {5}], [{1}, set(), set()],
                                               [{2}, set(), set()], [set(), set(), set()]]
    path, isolated, loop, empty = sample_subgraphs(
        data, [torch.tensor([0]), torch.tensor([3, 4]), torch.tensor([5]),
               torch.tensor([], dtype=torch.long)], hops=3)
    assert path.node_ids.tolist() == [0, 1, 2] and path.edge_ids.tolist() == [0, 1]
    assert path.target_edge_mask.tolist() == [True, False]
    assert isolated.node_ids.tolist() == [3, 4] and isolated.edge_index.shape == (2, 0)
    assert loop.edge_ids.tolist() == [2] and loop.edge_index.tolist() == [[0], [0]]
    assert loop.target_edge_mask.tolist() == [True]
    assert empty.num_nodes == 0 and empty.edge_ids.numel() == 0


def test_fanout_draws_at_most_f_neighbours_of_the_frontier() -> None:
    data = random_graph(3, 400, 2400)   # mean degree 12
    adjacency = symmetric_adjacency(data.edge_index, 400)
    neighbours = neighbour_lists(data.edge_index, 400)
    targets = [torch.tensor([0, 1, 2]), torch.tensor([7]), torch.tensor([50, 60])]
    fanout = [2, 3, 1]
    frontiers = expand(adjacency, target_matrix(targets, 400), 3, fanout,
                       torch.Generator().manual_seed(0))
    seen = [set(t.tolist()) for t in targets]
    for hop, (before, after) in enumerate(itertools.pairwise(frontiers)):
        for b, (old, new) in enumerate(zip(rows_of(before), rows_of(after))):
            reachable = set().union(*(neighbours[i] for i in old)) - seen[b]
            assert new <= reachable                         # only neighbours, only new hits
            assert len(new) <= fanout[hop] * len(old)       # at most f per frontier hit
            assert len(reachable) > fanout[hop] * len(old) or new == reachable
            seen[b] |= new
    full = [set(bfs_nodes(neighbours, t.tolist(), 3)) for t in targets]
    assert all(s < f for s, f in zip(seen, full))       # the limit really cut something
    again = expand(adjacency, target_matrix(targets, 400), 3, fanout,
                   torch.Generator().manual_seed(0))
    other = expand(adjacency, target_matrix(targets, 400), 3, fanout,
                   torch.Generator().manual_seed(1))
    assert all(torch.equal(a.to_dense(), b.to_dense()) for a, b in zip(frontiers, again))
    assert not all(torch.equal(a.to_dense(), b.to_dense()) for a, b in zip(frontiers, other))


def test_fanout_above_the_degree_is_bfs() -> None:
    data = random_graph(5, 60, 150)
    neighbours = neighbour_lists(data.edge_index, 60)
    big = max(len(n) for n in neighbours)
    targets = [torch.tensor([1, 2]), torch.tensor([30])]
    records = sample_subgraphs(data, targets, 3, [big] * 3, torch.Generator().manual_seed(0))
    for target, record in zip(targets, records):
        assert record.node_ids.tolist() == bfs_nodes(neighbours, target.tolist(), 3)


def test_node_cap_bounds_every_minibatch_and_keeps_the_inner_hops() -> None:
    data = random_graph(3, 400, 2400)   # mean degree 12: 3 hops reach most of the graph
    neighbours = neighbour_lists(data.edge_index, 400)
    targets = [torch.tensor([0, 1, 2]), torch.tensor([7]), torch.tensor([50, 60])]
    cap = 40
    records = sample_subgraphs(data, targets, 3, generator=torch.Generator().manual_seed(0),
                               max_nodes=cap)
    for target, record in zip(targets, records):
        nodes = set(record.node_ids.tolist())
        assert len(nodes) == cap                            # the ball holds far more
        assert set(target.tolist()) <= nodes
        hop1 = set(bfs_nodes(neighbours, target.tolist(), 1))
        if len(hop1) <= cap:                                # inner hops are filled first
            assert hop1 <= nodes
        assert nodes <= set(bfs_nodes(neighbours, target.tolist(), 3))
        # the subgraph is the one induced on its hits
        inside = torch.isin(data.edge_index, record.node_ids).all(0)
        assert record.edge_ids.tolist() == torch.nonzero(inside).flatten().tolist()
    again = sample_subgraphs(data, targets, 3, generator=torch.Generator().manual_seed(0),
                             max_nodes=cap)
    other = sample_subgraphs(data, targets, 3, generator=torch.Generator().manual_seed(1),
                             max_nodes=cap)
    assert all(torch.equal(a.node_ids, b.node_ids) for a, b in zip(records, again))
    assert not all(torch.equal(a.node_ids, b.node_ids) for a, b in zip(records, other))
    roomy = sample_subgraphs(data, targets, 3, max_nodes=400)   # a cap that never binds: BFS
    for target, record in zip(targets, roomy):
        assert record.node_ids.tolist() == bfs_nodes(neighbours, target.tolist(), 3)


def test_reference_loop_keeps_the_same_fanout_and_cap_rules() -> None:
    """The benchmark's one-at-a-time baseline obeys the bulk sampler's fan-out and cap."""
    import random
    data = random_graph(3, 400, 2400)
    neighbours = neighbour_lists(data.edge_index, 400)
    rng = random.Random(1)
    for targets in ([0, 1, 2], [7], [50, 60]):
        capped = set(bfs_nodes(neighbours, targets, 3, [2, 3, 1], 40, rng))
        assert set(targets) <= capped and len(capped) <= 40
        assert capped <= set(bfs_nodes(neighbours, targets, 3))
        hop1 = set(bfs_nodes(neighbours, targets, 1, [2], None, rng)) - set(targets)
        assert len(hop1) <= 2 * len(targets)
        assert hop1 <= set().union(*(neighbours[t] for t in targets))


def test_row_sampling_is_uniform() -> None:
    rows = torch.arange(4000).repeat_interleave(4)
    cols = torch.arange(4).repeat(4000)
    matrix = torch.sparse_coo_tensor(torch.stack([rows, cols]), torch.ones(16000),
                                     (4000, 4)).to_sparse_csr()
    chosen = sample_rows(matrix, 1, torch.Generator().manual_seed(0)).to_dense()
    assert torch.equal(chosen.sum(1), torch.ones(4000))     # exactly one per row
    counts = chosen.sum(0)                                  # ~1000 each (sd ~27)
    assert float(counts.min()) > 880 and float(counts.max()) < 1120
    two = sample_rows(matrix, 2, torch.Generator().manual_seed(1)).to_dense()
    assert torch.equal(two.sum(1), torch.full((4000,), 2.0))


def test_epoch_covers_every_connected_hit_once_and_splits_across_ranks() -> None:
    events = [random_graph(seed, 90, 120) for seed in (1, 2)]
    connected = [torch.nonzero(torch.bincount(e.edge_index.flatten(), minlength=90)).flatten()
                 for e in events]
    config = SamplingConfig(targets_per_batch=8, hops=2, bulk=3)
    one = list(SampledMinibatches(events, config, seed=4, rank=0, world_size=1))
    assert len(one) == sum(-(-len(c) // 8) for c in connected)
    assert sorted(torch.cat([r.target_ids for r in one]).tolist()) == sorted(
        torch.cat(connected).tolist())                   # each connected hit a target once
    assert all(bool(r.target_edge_mask.any()) for r in one)
    ranks = [list(SampledMinibatches(events, config, seed=4, rank=r, world_size=2))
             for r in (0, 1)]
    assert len(ranks[0]) == len(ranks[1]) >= len(one) // 2
    # step j of rank r is minibatch 2j + r of one process (within each event's list)
    for step, index in [(0, 0), (1, 2)]:
        assert torch.equal(ranks[0][step].edge_ids, one[index].edge_ids)
        assert torch.equal(ranks[1][step].edge_ids, one[index + 1].edge_ids)
    next_epoch = list(SampledMinibatches(events, config, seed=4, rank=0, world_size=1))
    assert [r.target_ids.tolist() for r in next_epoch] == [r.target_ids.tolist() for r in one]


def test_interleaved_events_alternate_and_keep_every_target_once() -> None:
    """interleave=2: blocks of ``bulk`` minibatches of one event, the two events' blocks
    shuffled together; each minibatch is the one sampled from its own event alone."""
    events = [random_graph(1, 60, 90), random_graph(2, 400, 600)]
    config = SamplingConfig(targets_per_batch=8, hops=2, bulk=3, interleave=2)
    one = list(SampledMinibatches(events, config, seed=4, rank=0, world_size=1))
    connected = [torch.nonzero(torch.bincount(e.edge_index.flatten(), minlength=e.num_nodes))
                 .flatten() for e in events]
    assert len(one) == sum(-(-len(c) // 8) for c in connected)
    # the small event's hits are 0..59: a minibatch with a target >= 60 is the large event's
    owner = [int(r.target_ids.max() >= 60 or r.num_nodes > 60) for r in one]
    small = [r for r, o in zip(one, owner) if o == 0]
    assert sorted(torch.cat([r.target_ids for r in small]).tolist()) == connected[0].tolist()
    changes = sum(a != b for a, b in itertools.pairwise(owner))
    assert changes > 2                       # not one event after the other
    at = [i for i, o in enumerate(owner) if o == 0]
    assert at[-1] - at[0] + 1 > len(at)      # the small event's minibatches are spread out
    for record, event in zip(one, owner):
        alone = sample_subgraphs(events[event], [record.target_ids], hops=2)[0]
        assert torch.equal(alone.edge_ids, record.edge_ids)
    ranks = [list(SampledMinibatches(events, config, seed=4, rank=r, world_size=2))
             for r in (0, 1)]
    assert len(ranks[0]) == len(ranks[1]) == -(-len(one) // 2)
    for step in range(len(one) // 2):        # step j of rank r is minibatch 2j + r
        for r in (0, 1):
            assert torch.equal(ranks[r][step].edge_ids, one[2 * step + r].edge_ids)
    with pytest.raises(ValueError, match="interleave"):
        SamplingConfig(interleave=0)


def test_config_errors_name_the_key() -> None:
    with pytest.raises(ValueError, match="fanout needs one entry per hop"):
        SamplingConfig(hops=3, fanout=[5, 5])
    with pytest.raises(ValueError, match="method"):
        SamplingConfig(method="graphsage")
    assert SamplingConfig(hops=2, fanout=[]).fanout is None
    assert SamplingConfig(hops=2, fanout=[4, 0]).fanout == (4, 0)
    with pytest.raises(ValueError, match=r"max_nodes \(32\) must be at least targets_per_batch"):
        SamplingConfig(targets_per_batch=64, max_nodes=32)
    assert SamplingConfig(targets_per_batch=64, max_nodes=64).max_nodes == 64
