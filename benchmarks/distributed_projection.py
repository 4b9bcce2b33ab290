"""Alpha-beta projection of a training step to many ranks from the exact traffic plans.

For world size ``P`` the traffic of one GNN iteration (one gather and one aggregate, forward
and backward) is computed without running P processes: the sparse-1d halo from the ``sector``
partition at P, and the oblivious-1d / 1.5d counts of :mod:`trkx.gnn.distributed.volume` (the
tests check that both equal what the ranks measure). A step then costs

    T(P) = compute_1 / P + iterations * (alpha * latency_steps + bytes / beta)

with, per rank: sparse-1d the worst rank's bytes and its non-empty messages; oblivious-1d and
1.5d the average bytes (bandwidth-optimal pipelined broadcast/reduce, as in CAGNET's model) and
``ceil(log2 g)`` latency steps per collective over ``g`` ranks.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from trkx.gnn.distributed.layout import ProcessLayout
from trkx.gnn.distributed.partition import halo_sizes, make_partition
from trkx.gnn.distributed.volume import oblivious, onefive

BYTES_FP32 = 4


def _tree(group: int) -> int:
    """Latency steps of a tree broadcast/reduce/all_reduce over ``group`` ranks."""
    return math.ceil(math.log2(group)) if group > 1 else 0


def projected_traffic(edge_index: torch.Tensor, pos: torch.Tensor, num_nodes: int, P: int,
                      width: int) -> dict:
    """Bytes received per rank and latency steps for one GNN iteration at world size P.

    Computed from the exact plans (sparse-1d halo; the analytic oblivious / 1.5d counts that
    the tests check equal the measured ones). sparse-1d: the worst rank (point-to-point,
    latency = non-empty messages). oblivious-1d and 1.5d: total / P, i.e. bandwidth-optimal
    (pipelined) broadcast and reduce as in CAGNET's model, latency = ceil(log2 g) per
    collective over g ranks."""
    row = width * BYTES_FP32
    owner = make_partition("sector", P, edge_index, pos, num_nodes)
    sizes = torch.bincount(owner, minlength=P).tolist()
    halo = halo_sizes(edge_index, owner, P)
    src, dst = edge_index[0].numpy(), edge_index[1].numpy()
    own = owner.numpy()
    cross = own[src] != own[dst]
    pairs = np.unique(own[dst[cross]].astype(np.int64) * P + own[src[cross]])
    neighbours = np.bincount(pairs // P, minlength=P) + np.bincount(pairs % P, minlength=P)
    returned = np.zeros(P, dtype=np.int64)
    keys = np.unique(own[dst[cross]].astype(np.int64) * num_nodes + src[cross])
    np.add.at(returned, own[keys % num_nodes], 1)
    # gather fwd + aggregate bwd fetch the halo; gather bwd + aggregate fwd return partial sums
    out = {"sparse-1d": {"bytes": int(np.max(2 * (halo + returned) * row)),
                         "latency_steps": int(2 * np.max(neighbours))}}
    total = sum(sum(v.bytes_received for v in oblivious(sizes, p, row).values())
                for p in range(P))
    out["oblivious-1d"] = {"bytes": total // P, "latency_steps": 4 * P * _tree(P)}
    c = max(2, round(math.sqrt(P / 2)))
    while P % (c * c):
        c -= 1
    blocks = P // c
    owner_b = make_partition("sector", blocks, edge_index, pos, num_nodes).numpy()
    sizes_b = np.bincount(owner_b, minlength=blocks).tolist()
    sources_b = np.bincount(np.unique(owner_b[dst].astype(np.int64) * num_nodes + src)
                            // num_nodes, minlength=blocks)
    total = 0
    for rank in range(P):
        layout = ProcessLayout(P, rank, c)
        counts = onefive(sizes_b, layout, int(sources_b[layout.block]), row)
        total += sum(v.bytes_received for v in counts.values())
    steps = 4 * (blocks // c) * _tree(blocks) + 4 * _tree(c)
    out[f"1.5d-c{c}"] = {"bytes": total // P, "latency_steps": steps}
    return out


def project(edge_index, pos, num_nodes, width, compute_1, alpha, beta, iterations,
            sizes=(64, 256)):
    """Step time per rank at each P: compute_1 / P + iterations x (alpha steps + bytes / beta)."""
    rows = {}
    for P in sizes:
        traffic = projected_traffic(edge_index, pos, num_nodes, P, width)
        rows[str(P)] = {}
        for name, t in traffic.items():
            t = {"bytes": t["bytes"] * iterations,
                 "latency_steps": t["latency_steps"] * iterations}
            comm = alpha * t["latency_steps"] + t["bytes"] / beta
            rows[str(P)][name] = {**t, "comm_s": comm, "compute_s": compute_1 / P,
                                  "step_s": compute_1 / P + comm}
    return rows
