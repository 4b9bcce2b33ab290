"""Bulk ShaDow subgraph sampling, every step a sparse matrix product (DESIGN.md, "Minibatches").

For E directed edges ``k = (s_k -> d_k)`` over N hits let S and D be the E x N incidence
matrices (``S[k, s_k] = 1``, ``D[k, d_k] = 1``) and

    A = D^T S + S^T D                                   N x N symmetrised adjacency (pattern)

k minibatches, minibatch b with target hits T_b, are sampled together (bulk). With Q the
B x N selection matrix (one row per target hit, ``Q[r, t_r] = 1``, B = sum_b |T_b|) and R the
k x B matrix that sums the rows of one minibatch (``R[b, r] = 1`` when row r is a target of b):

    F_0 = pattern(R Q)                                  k x N, row b = T_b
    V_0 = F_0
    F_{l+1} = pattern(F_l A) o (1 - V_l)                 new hits reached at hop l+1
    V_{l+1} = V_l + F_{l+1}                              l = 0 .. L-1  (``hops`` = L)

(``o`` is the Hadamard product; it is applied on the index pairs.) Row b of V_L holds V_b, the
hits within L hops of T_b: the union of the minibatch's frontiers. With a fan-out limit f_l the
product of hop l is taken per frontier hit: split F_l = R_l H_l into its nonzeros (H_l: one row
per pair (b, i) with ``F_l[b, i] = 1``, R_l: k x nnz(F_l) sums them back), then

    G_l = H_l A                                         row j = the neighbours of hit i_j
    F_{l+1} = pattern(R_l sample_{f_l}(G_l)) o (1 - V_l)

where ``sample_f`` keeps at most f uniformly drawn entries of every row (a seeded generator).
Without a limit ``R_l H_l A = F_l A``: the two forms agree.

The subgraph of minibatch b is the row/column selection P_b A P_b^T; as original edges it is

    C = V_L (S + D)^T                   k x E,  C[b, k] = [s_k in V_b] + [d_k in V_b]

and edge k belongs to minibatch b exactly when ``C[b, k] = 2`` (a self-loop has a 2 in
``(S + D)^T`` and counts once). Original edge ids are kept, so labels, weights and scores map
back. The edges touching a target hit (``target_edge_mask``) are the ones whose loss counts.

Receptive field. In a T-iteration interaction network (trkx.gnn.model) the hidden state of a
hit after t iterations depends on the hits within t hops, and an edge score on the states of
both ends after T iterations: the score of an edge touching a target hit reads the hits within
T + 1 hops of that target. With ``hops = T + 1`` and no fan-out limit, every hit at distance
<= T has all its edges in the induced subgraph, so the target-edge scores on the subgraph equal
the full-graph scores (tests/test_sampling_exact.py; ``hops = T`` is not enough).

Every product runs with torch.sparse (CSR @ CSR, CPU or CUDA); tensors stay on their device.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import torch
from torch import Tensor
from torch_geometric.data import Data

NODE_KEYS: tuple[str, ...] = ("x",)
EDGE_KEYS: tuple[str, ...] = ("y", "y_pid", "signal")


def _csr(rows: Tensor, cols: Tensor, shape: tuple[int, int],
         values: Tensor | None = None) -> Tensor:
    """Sparse CSR matrix (float32, duplicate entries summed) from COO index pairs."""
    if values is None:
        values = torch.ones(rows.numel(), dtype=torch.float32, device=rows.device)
    with warnings.catch_warnings():  # "CSR support is in beta": the tests cover what we use
        warnings.filterwarnings("ignore", message=".*[Ss]parse.*")
        coo = torch.sparse_coo_tensor(torch.stack([rows, cols]), values, shape).coalesce()
        return coo.to_sparse_csr()


def _pairs(matrix: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """``(rows, cols, values)`` of the stored entries of a sparse matrix, sorted by (row, col)."""
    if matrix.layout == torch.sparse_csr:  # the column order of an SpGEMM result is unsorted
        crow, cols, values = matrix.crow_indices(), matrix.col_indices(), matrix.values()
        rows = torch.repeat_interleave(torch.arange(matrix.shape[0], device=crow.device),
                                       crow.diff())
    else:
        coo = matrix.coalesce()
        (rows, cols), values = coo.indices(), coo.values()
    order = torch.argsort(rows * matrix.shape[1] + cols)
    return rows[order], cols[order], values[order]


def symmetric_adjacency(edge_index: Tensor, num_nodes: int) -> Tensor:
    """``A = D^T S + S^T D`` as an N x N CSR pattern (every stored value 1)."""
    src, dst = edge_index[0].long(), edge_index[1].long()
    rows, cols = torch.cat([dst, src]), torch.cat([src, dst])
    adjacency = _csr(rows, cols, (num_nodes, num_nodes))
    return torch.sparse_csr_tensor(adjacency.crow_indices(), adjacency.col_indices(),
                                   torch.ones_like(adjacency.values()), adjacency.shape)


def incidence_sum_transposed(edge_index: Tensor, num_nodes: int) -> Tensor:
    """``(S + D)^T``: N x E CSR, entry 1 at (s_k, k) and (d_k, k) (2 for a self-loop)."""
    edges = torch.arange(edge_index.shape[1], device=edge_index.device)
    return _csr(torch.cat([edge_index[0].long(), edge_index[1].long()]),
                torch.cat([edges, edges]), (num_nodes, edge_index.shape[1]))


def target_matrix(targets: Sequence[Tensor], num_nodes: int) -> Tensor:
    """``F_0 = pattern(R Q)``: the k x N CSR whose row b marks the target hits ``targets[b]``."""
    device = targets[0].device if len(targets) else torch.device("cpu")
    sizes = torch.tensor([t.numel() for t in targets], device=device)
    selection_rows = torch.arange(int(sizes.sum()), device=device)
    cols = torch.cat([t.long() for t in targets]) if len(targets) else selection_rows
    q = _csr(selection_rows, cols, (selection_rows.numel(), num_nodes))            # B x N
    r = _csr(torch.repeat_interleave(torch.arange(len(targets), device=device), sizes),
             selection_rows, (len(targets), selection_rows.numel()))               # k x B
    return _pattern(torch.sparse.mm(r, q))


def _pattern(matrix: Tensor) -> Tensor:
    """The sparsity pattern of a CSR matrix: stored entries set to 1, explicit zeros dropped."""
    rows, cols, values = _pairs(matrix)
    keep = values != 0
    return _csr(rows[keep], cols[keep], tuple(matrix.shape))


def sample_rows(matrix: Tensor, fanout: int, generator: torch.Generator | None) -> Tensor:
    """``sample_f``: keep at most ``fanout`` entries of every row, drawn uniformly without
    replacement (random keys, then the ``fanout`` smallest keys of each row)."""
    rows, cols, _ = _pairs(matrix)
    keys = torch.rand(rows.numel(), generator=generator, device=rows.device)
    order = torch.argsort(keys)
    order = order[torch.argsort(rows[order], stable=True)]           # by row, random within
    sorted_rows = rows[order]
    counts = torch.bincount(sorted_rows, minlength=matrix.shape[0])
    starts = torch.cumsum(counts, 0) - counts
    rank = torch.arange(rows.numel(), device=rows.device) - starts[sorted_rows]
    chosen = order[rank < fanout]
    return _csr(rows[chosen], cols[chosen], tuple(matrix.shape))


def _keys(matrix: Tensor) -> Tensor:
    """Sorted flat keys ``row * ncols + col`` of the stored entries (for Hadamard masks)."""
    rows, cols, _ = _pairs(matrix)
    return rows * matrix.shape[1] + cols


def _from_keys(keys: Tensor, shape: tuple[int, int]) -> Tensor:
    return _csr(torch.div(keys, shape[1], rounding_mode="floor"), keys % shape[1], shape)


def expand(adjacency: Tensor, frontier: Tensor, hops: int,
           fanout: Sequence[int] | None = None,
           generator: torch.Generator | None = None) -> list[Tensor]:
    """Frontiers ``[F_0, ..., F_L]`` (k x N CSR patterns) of L = ``hops`` expansions.

    ``fanout[l]`` (when given and > 0) caps the neighbours drawn per frontier hit at hop l.
    """
    if hops < 0:
        raise ValueError(f"hops must be >= 0, got {hops}")
    if fanout is not None and len(fanout) not in (0, hops):
        raise ValueError(f"fanout needs one entry per hop ({hops}), got {list(fanout)}")
    frontiers = [frontier]
    visited = _keys(frontier)
    shape = tuple(frontier.shape)
    for hop in range(hops):
        limit = fanout[hop] if fanout else 0
        if limit > 0:
            rows, cols, _ = _pairs(frontier)
            pairs = torch.arange(rows.numel(), device=rows.device)
            h = _csr(pairs, cols, (rows.numel(), shape[1]))                   # H_l
            r = _csr(rows, pairs, (shape[0], rows.numel()))                   # R_l
            reached = torch.sparse.mm(r, sample_rows(torch.sparse.mm(h, adjacency), limit,
                                                     generator))
        else:
            reached = torch.sparse.mm(frontier, adjacency)                    # F_l A
        keys = _keys(_pattern(reached))
        new = keys[~torch.isin(keys, visited)]                               # o (1 - V_l)
        frontier = _from_keys(new, shape)
        visited = torch.sort(torch.cat([visited, new])).values
        frontiers.append(frontier)
    return frontiers


def node_sets(frontiers: Sequence[Tensor]) -> Tensor:
    """``V_L = sum_l F_l`` as a k x N CSR pattern (the frontiers are disjoint)."""
    keys = torch.sort(torch.cat([_keys(f) for f in frontiers])).values
    return _from_keys(keys, tuple(frontiers[0].shape))


def sample_subgraphs(data: Data, targets: Sequence[Tensor], hops: int,
                     fanout: Sequence[int] | None = None,
                     generator: torch.Generator | None = None,
                     adjacency: Tensor | None = None, incidence: Tensor | None = None,
                     node_keys: Sequence[str] = NODE_KEYS,
                     edge_keys: Sequence[str] = EDGE_KEYS) -> list[Data]:
    """One minibatch ``Data`` per entry of ``targets`` (bulk: all from the same products).

    Each record has ``edge_index`` (relabelled into ``node_ids`` order), the ``node_keys`` rows
    and ``edge_keys`` entries of ``data`` that exist, ``node_ids`` / ``edge_ids`` (original
    ids, ascending), ``target_ids``, ``target_edge_mask`` and ``num_nodes``. ``adjacency`` (A) and
    ``incidence`` ((S + D)^T) may be passed in when the same event is sampled again.
    """
    if not len(targets):
        return []
    num_nodes, edge_index = int(data.num_nodes), data.edge_index.long()
    if adjacency is None:
        adjacency = symmetric_adjacency(edge_index, num_nodes)
    if incidence is None:
        incidence = incidence_sum_transposed(edge_index, num_nodes)
    f0 = target_matrix(targets, num_nodes)
    members = node_sets(expand(adjacency, f0, hops, fanout, generator))        # V_L, k x N
    node_rows, node_cols, _ = _pairs(members)
    edge_rows, edge_cols, counts = _pairs(torch.sparse.mm(members, incidence))  # C, k x E
    inside = counts == 2
    edge_rows, edge_cols = edge_rows[inside], edge_cols[inside]
    k = len(targets)
    node_flat = node_rows * num_nodes + node_cols                               # sorted
    node_start = torch.cumsum(torch.bincount(node_rows, minlength=k), 0)
    node_start = torch.cat([node_start.new_zeros(1), node_start[:-1]])
    base = edge_rows * num_nodes
    src, dst = edge_index[0, edge_cols], edge_index[1, edge_cols]
    local = torch.stack([torch.searchsorted(node_flat, base + src),
                         torch.searchsorted(node_flat, base + dst)]) - node_start[edge_rows]
    target_flat = _keys(f0)
    touches = torch.isin(base + src, target_flat) | torch.isin(base + dst, target_flat)
    n_nodes = torch.bincount(node_rows, minlength=k).tolist()
    n_edges = torch.bincount(edge_rows, minlength=k).tolist()
    node_parts = torch.split(node_cols, n_nodes)
    edge_parts = torch.split(edge_cols, n_edges)
    local_parts = torch.split(local, n_edges, dim=1)
    mask_parts = torch.split(touches, n_edges)
    records = []
    for b in range(k):
        record = Data(edge_index=local_parts[b], node_ids=node_parts[b],
                      edge_ids=edge_parts[b], target_edge_mask=mask_parts[b],
                      target_ids=targets[b].long())
        for key in node_keys:
            if getattr(data, key, None) is not None:
                record[key] = data[key][node_parts[b]]
        for key in edge_keys:
            if getattr(data, key, None) is not None:
                record[key] = data[key][edge_parts[b]]
        record.num_nodes = n_nodes[b]
        records.append(record)
    return records
