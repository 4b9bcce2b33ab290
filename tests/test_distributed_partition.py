"""Process layout and partitioners (single process, no communication)."""

from __future__ import annotations

import pytest
import torch

from tests.distributed_worker import make_graph
from trkx.gnn.distributed.layout import ProcessLayout
from trkx.gnn.distributed.partition import (
    balanced,
    block_work,
    contiguous,
    halo_sizes,
    make_partition,
    sector,
)
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
    work = block_work(edge_index, owners["balanced"], parts)
    assert work.max() / work.mean() <= 1.05, work


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
