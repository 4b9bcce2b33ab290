"""What a partition costs, without running any process: edge balance and analytic traffic.

For one event graph, a partitioner and a world size ``P`` (feature rows of ``r = f * b`` bytes):

    edge_imbalance   max_p |E_p| / mean_p |E_p|     (|E_p|: edges owned, the work of a rank)
    node_imbalance   max_p |V_p| / mean_p |V_p|
    halo_rows        sum_p |H_p|                    (rows ``sparse-1d`` fetches per gather)
    bytes[alg]       bytes received in one GNN iteration (one gather and one aggregate,
                     forward and backward), summed over the ranks ("total") and on the
                     busiest rank ("max_rank"), from :mod:`.volume`

``1.5d`` is counted with replication ``c = 2`` (its ``P / 2`` blocks partitioned by the same
partitioner) when ``P`` is divisible by 4. These are the volumes the ranks measure (the
distributed tests check equality), so they choose the algorithm and ``P`` before a launch.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch
from torch import Tensor

from .block_counts import edges_per_block, halo_sizes
from .layout import ProcessLayout
from .partition import make_partition
from .volume import oblivious, onefive, sparse1d

ONEFIVE_REPLICATION = 2


def _received(per_op: dict) -> int:
    return sum(counter.bytes_received for counter in per_op.values())


def _summary(per_rank: list[int]) -> dict[str, int]:
    return {"total": int(sum(per_rank)), "max_rank": int(max(per_rank))}


def partition_figures(edge_index: Tensor, pos: Tensor | None, num_nodes: int, num_parts: int,
                      partitioner: str, width: int = 128, bytes_per_value: int = 4
                      ) -> dict[str, Any]:
    """The figures of the module docstring for one graph, partitioner and ``P``."""
    edge_index = edge_index.to(torch.int64).cpu()
    row = width * bytes_per_value
    start = time.perf_counter()
    owner = make_partition(partitioner, num_parts, edge_index, pos, num_nodes)
    seconds = time.perf_counter() - start
    edges = edges_per_block(edge_index, owner, num_parts)
    nodes = np.bincount(owner.numpy(), minlength=num_parts)
    sizes = nodes.tolist()
    out: dict[str, Any] = {
        "edge_imbalance": float(edges.max() / edges.mean()),
        "node_imbalance": float(nodes.max() / nodes.mean()),
        "halo_rows": int(halo_sizes(edge_index, owner, num_parts).sum()),
        "partition_seconds": seconds,
        "bytes": {
            "sparse-1d": _summary([_received(ops) for ops in
                                   sparse1d(edge_index, owner, num_parts, row)]),
            "oblivious-1d": _summary([_received(oblivious(sizes, p, row))
                                      for p in range(num_parts)]),
        },
    }
    c = ONEFIVE_REPLICATION
    if num_parts % (c * c) == 0:
        blocks = num_parts // c
        owner_b = make_partition(partitioner, blocks, edge_index, pos, num_nodes).numpy()
        sizes_b = np.bincount(owner_b, minlength=blocks).tolist()
        src, dst = edge_index[0].numpy(), edge_index[1].numpy()
        sources = np.bincount(np.unique(owner_b[dst].astype(np.int64) * num_nodes + src)
                              // num_nodes, minlength=blocks)
        per_rank = []
        for rank in range(num_parts):
            layout = ProcessLayout(num_parts, rank, c)
            per_rank.append(_received(onefive(sizes_b, layout, int(sources[layout.block]),
                                              row)))
        out["bytes"][f"1.5d-c{c}"] = _summary(per_rank)
    return out


def mean_figures(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The mean of the figures of several events (same keys), recursively."""
    first = rows[0]
    if isinstance(first, dict):
        return {key: mean_figures([row[key] for row in rows]) for key in first}
    return float(np.mean(rows))
