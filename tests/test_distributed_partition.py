"""Process layout and partitioners (single process, no communication)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.distributed_worker import make_graph
from trkx.gnn.distributed.block_counts import edge_imbalance, edges_per_block, halo_sizes
from trkx.gnn.distributed.graph_partition import move_gains, refine
from trkx.gnn.distributed.layout import ProcessLayout
from trkx.gnn.distributed.partition import balanced, contiguous, make_partition, sector
from trkx.gnn.distributed.shard import GraphShard


def test_layout_rows_columns_and_chunks():
    layout = ProcessLayout(world_size=8, rank=5, replication=2)
    assert (layout.num_blocks, layout.block, layout.replica) == (4, 2, 1)
    assert layout.row_ranks(2) == [4, 5]
    assert layout.column_ranks(1) == [1, 3, 5, 7]
    assert list(layout.chunk(0)) == [0, 1] and list(layout.chunk(1)) == [2, 3]
    assert layout.chunk_owner(3) == 1
    with pytest.raises(ValueError, match="divisible by c\\^2"):
        ProcessLayout(world_size=6, rank=0, replication=2)


@pytest.mark.parametrize("parts", [2, 4])
def test_partitioners_cover_nodes_and_sector_cuts_halo(parts):
    pos, _x, edge_index, _y = make_graph()
    n = pos.shape[0]
    # hits in arbitrary order (the test graph is built layer by layer, which would make the
    # contiguous split a radial cut)
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(1))
    pos, edge_index = pos[perm], torch.argsort(perm)[edge_index]
    owners = {"contiguous": contiguous(n, parts), "sector": sector(pos, parts, edge_index),
              "balanced": balanced(pos, edge_index, parts)}
    for name, owner in owners.items():
        assert owner.shape == (n,) and int(owner.min()) == 0 and int(owner.max()) == parts - 1
        assert torch.equal(owner, make_partition(name, parts, edge_index, pos, n))
    sizes = torch.bincount(owners["contiguous"])
    assert int(sizes.max() - sizes.min()) <= 1
    halo = {name: int(halo_sizes(edge_index, o, parts).sum()) for name, o in owners.items()}
    assert halo["sector"] < halo["contiguous"]
    # equal owned edges up to one node's in-degree
    edges = edges_per_block(edge_index, owners["balanced"], parts)
    max_in_degree = int(torch.bincount(edge_index[1]).max())
    assert edges.max() - edges.min() <= max_in_degree, edges


def skewed_graph():
    """The test graph with hits in random order and a dense region (every edge into the
    first layer's phi > 2 hits doubled as a second layer-1 hop), so equal node counts do not
    give equal edge counts."""
    pos, _x, edge_index, _y = make_graph(num_layers=8, per_layer=60)
    n = pos.shape[0]
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(2))
    pos, edge_index = pos[perm], torch.argsort(perm)[edge_index]
    dense = pos[edge_index[1], 1] > 1.5
    edge_index = torch.cat([edge_index, edge_index[:, dense].flip(0)], 1)
    return pos, edge_index


@pytest.mark.parametrize("parts", [4, 8])
def test_balanced_equalises_edges_where_sector_does_not(parts):
    pos, edge_index = skewed_graph()
    n = pos.shape[0]
    sector_imbalance = edge_imbalance(edge_index, sector(pos, parts, edge_index), parts)
    balanced_imbalance = edge_imbalance(edge_index, balanced(pos, edge_index, parts), parts)
    assert sector_imbalance > 1.15
    assert balanced_imbalance < 1.05
    assert torch.equal(make_partition("balanced", parts, edge_index, pos, n),
                       balanced(pos, edge_index, parts))


@pytest.mark.parametrize("parts", [2, 4, 8])
def test_balanced_keeps_side_by_side_events_whole(parts):
    """Four events side by side (disconnected, hits interleaved): components first, so each
    piece boundary cuts at most one component, where the sector ordering alone cuts every
    event at every sector boundary."""
    pos, edge_index = skewed_graph()
    n, events = pos.shape[0], 4
    perm = torch.randperm(events * n, generator=torch.Generator().manual_seed(3))
    many_pos = torch.cat([pos] * events)[perm]
    many_edges = torch.argsort(perm)[torch.cat([edge_index + e * n for e in range(events)], 1)]
    owner = balanced(many_pos, many_edges, parts)
    assert edge_imbalance(many_edges, owner, parts) < 1.05
    one_event = int(halo_sizes(edge_index, balanced(pos, edge_index, parts), parts).sum())
    halo = int(halo_sizes(many_edges, owner, parts).sum())
    assert halo <= max(1, parts // events) * one_event           # a per-event cut at most
    if parts <= events:      # pieces of whole events: nothing to exchange
        assert halo == 0


def test_move_gains_counts_neighbours_per_block():
    # path 0-1-2-3 plus 1-3 (undirected CSR); blocks {0, 1} and {2, 3}
    indptr = np.array([0, 1, 4, 6, 8])
    neighbours = np.array([1, 0, 2, 3, 1, 3, 1, 2])
    nodes, target, gain = move_gains(indptr, neighbours, np.array([0, 0, 1, 1]), 2)
    # node 1: 1 neighbour in its block, 2 in block 1 -> gain 1; node 2: 1 vs 1 -> 0;
    # node 3: 1 vs 1 -> 0
    assert nodes.tolist() == [1, 2, 3]
    assert target.tolist() == [1, 0, 0]
    assert gain.tolist() == [1, 0, 0]


@pytest.mark.parametrize("parts", [4, 8])
def test_refined_cuts_halo_and_keeps_edge_balance(parts):
    pos, edge_index = skewed_graph()
    n = pos.shape[0]
    start = balanced(pos, edge_index, parts)
    refined = refine(edge_index, start, parts, tolerance=0.03)
    assert halo_sizes(edge_index, refined, parts).sum() < 0.95 * halo_sizes(
        edge_index, start, parts).sum()
    assert edge_imbalance(edge_index, refined, parts) <= max(
        1.03, edge_imbalance(edge_index, start, parts)) + 1e-12
    assert torch.equal(make_partition("refined", parts, edge_index, pos, n), refined)


@pytest.mark.parametrize("parts", [4, 8])
def test_metis_balances_edges_and_cuts_less_than_sector(parts):
    pytest.importorskip("pymetis")
    pos, edge_index = skewed_graph()
    n = pos.shape[0]
    owner = make_partition("metis", parts, edge_index, None, n)
    assert sorted(owner.unique().tolist()) == list(range(parts))
    assert edge_imbalance(edge_index, owner, parts) < 1.08
    assert halo_sizes(edge_index, owner, parts).sum() < halo_sizes(
        edge_index, sector(pos, parts, edge_index), parts).sum()


def test_shard_owns_edges_of_its_destinations():
    pos, _x, edge_index, _y = make_graph()
    owner = sector(pos, 4, edge_index)
    seen = torch.zeros(edge_index.shape[1], dtype=torch.int64)
    for block in range(4):
        shard = GraphShard.build(edge_index, owner, block, 4)
        assert bool((owner[edge_index[1, shard.edges]] == block).all())
        assert torch.equal(shard.nodes[shard.dst_local], edge_index[1, shard.edges])
        seen[shard.edges] += 1
    assert bool((seen == 1).all())


def test_bad_partitioner_and_positions_are_named():
    pos, _x, edge_index, _y = make_graph()
    with pytest.raises(ValueError, match="unknown partitioner 'spiral'"):
        make_partition("spiral", 2, edge_index, pos, pos.shape[0])
    with pytest.raises(ValueError, match="needs node positions"):
        make_partition("sector", 2, edge_index, None, pos.shape[0])
