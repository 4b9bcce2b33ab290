"""Bulk ShaDow subgraph sampling, every step a sparse product (docs/design.md, "Minibatches").

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
Without a limit ``R_l H_l A = F_l A``: the two forms agree. With a cap m on the hits of a
minibatch (``max_nodes``, the ShaDow bound on a subgraph's size whatever the fan-out reaches),
row b of each new frontier keeps at most ``m - |V_{l,b}|`` of its hits, drawn uniformly:

    F_{l+1} = cap_{m - |V_l|}(F_{l+1})                  so |V_b| <= max(m, |T_b|)

The subgraph of minibatch b is the row/column selection P_b A P_b^T; as original edges it is

    C = (V_L S^T) o (V_L D^T)            k x E,  C[b, k] = [s_k in V_b] [d_k in V_b]

and edge k belongs to minibatch b exactly when ``C[b, k] = 1``. ``V_L S^T`` (the edges leaving a
member, each once: an edge has one source) is a row gather of the CSR matrix ``S^T``; its
Hadamard product with ``V_L D^T`` is a lookup of ``(b, d_k)`` among the sorted member keys.
Original edge ids are kept, so labels, weights and scores map back. The edges touching a
target hit (``target_edge_mask``) are the ones whose loss counts.

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

from trkx.data.record import EDGE_FIELDS, NHITS, POS, PRODUCTION_RADIUS, PT, X
from trkx.data.record_type import Record

# pos: the GNN's edge geometry inputs; pt and production_radius (truth, when the record has
# them): pT- and secondary-weighted losses
NODE_KEYS: tuple[str, ...] = (X, POS, PT, PRODUCTION_RADIUS, NHITS)
EDGE_KEYS: tuple[str, ...] = EDGE_FIELDS  # labels and the filter's scores


def _csr(rows: Tensor, cols: Tensor, shape: tuple[int, int],
         values: Tensor | None = None) -> Tensor:
    """Sparse CSR matrix (float32, duplicate entries summed) from COO index pairs."""
    if values is None:
        values = torch.ones(rows.numel(), dtype=torch.float32, device=rows.device)
    with warnings.catch_warnings():  # "CSR support is in beta": the tests cover what we use
        warnings.filterwarnings("ignore", message=".*[Ss]parse.*")
        coo = torch.sparse_coo_tensor(torch.stack([rows, cols]), values, shape).coalesce()
        return coo.to_sparse_csr()


def _csr_from_keys(keys: Tensor, shape: tuple[int, int]) -> Tensor:
    """The CSR pattern of the sorted, distinct flat keys ``row * ncols + col`` (no sorting)."""
    rows = torch.div(keys, shape[1], rounding_mode="floor")
    crow = torch.zeros(shape[0] + 1, dtype=torch.int64, device=keys.device)
    torch.cumsum(torch.bincount(rows, minlength=shape[0]), 0, out=crow[1:])
    values = torch.ones(keys.numel(), dtype=torch.float32, device=keys.device)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*[Ss]parse.*")
        return torch.sparse_csr_tensor(crow, keys % shape[1], values, shape)


def _entries(matrix: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """``(rows, cols, values)`` of a CSR matrix in storage order: rows ascending, columns in
    the order the kernel left them (an SpGEMM result's columns are not sorted)."""
    crow = matrix.crow_indices()
    rows = torch.repeat_interleave(torch.arange(matrix.shape[0], device=crow.device),
                                   crow.diff())
    return rows, matrix.col_indices(), matrix.values()


def _nonzero_keys(matrix: Tensor) -> Tensor:
    """Sorted distinct flat keys of the nonzero entries of a CSR matrix (its pattern)."""
    rows, cols, values = _entries(matrix)
    keys = (rows * matrix.shape[1] + cols)[values != 0]
    return torch.sort(keys).values     # CSR entries are distinct: a sort, not a unique


def _member(sorted_keys: Tensor, keys: Tensor) -> Tensor:
    """``keys[j] in sorted_keys`` for every j (binary search)."""
    if sorted_keys.numel() == 0:
        return torch.zeros(keys.shape, dtype=torch.bool, device=keys.device)
    at = torch.searchsorted(sorted_keys, keys).clamp_max(sorted_keys.numel() - 1)
    return sorted_keys[at] == keys


def symmetric_adjacency(edge_index: Tensor, num_nodes: int) -> Tensor:
    """``A = D^T S + S^T D`` as an N x N CSR pattern (every stored value 1)."""
    src, dst = edge_index[0].long(), edge_index[1].long()
    rows, cols = torch.cat([dst, src]), torch.cat([src, dst])
    adjacency = _csr(rows, cols, (num_nodes, num_nodes))
    return torch.sparse_csr_tensor(adjacency.crow_indices(), adjacency.col_indices(),
                                   torch.ones_like(adjacency.values()), adjacency.shape)


def source_incidence_transposed(edge_index: Tensor, num_nodes: int) -> Tensor:
    """``S^T``: N x E CSR, entry 1 at (s_k, k): row i lists the edges leaving hit i."""
    edges = torch.arange(edge_index.shape[1], device=edge_index.device)
    return _csr(edge_index[0].long(), edges, (num_nodes, edge_index.shape[1]))


def _gather_rows(matrix: Tensor, rows: Tensor) -> tuple[Tensor, Tensor]:
    """``(j, cols)``: the columns of rows ``rows[j]`` of a CSR matrix, row after row (rows may
    repeat): the entries of ``H M`` for the selection H with ``H[j, rows[j]] = 1``."""
    crow = matrix.crow_indices()
    starts, counts = crow[rows], crow[rows + 1] - crow[rows]
    which = torch.repeat_interleave(torch.arange(rows.numel(), device=rows.device), counts)
    first = torch.cumsum(counts, 0) - counts
    offset = torch.arange(which.numel(), device=rows.device) - first[which]
    return which, matrix.col_indices()[starts[which] + offset]


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
    return _csr_from_keys(_nonzero_keys(matrix), tuple(matrix.shape))


def _random_rank_in_row(rows: Tensor, num_rows: int,
                        generator: torch.Generator | None) -> tuple[Tensor, Tensor]:
    """``(order, rank)``: entries ordered by row and uniformly at random within a row, and
    the position of ``order[j]`` within its row (keeping ``rank < f`` draws f per row without
    replacement)."""
    priority = torch.rand(rows.numel(), generator=generator, device=rows.device)
    # one sort by (row, priority): row + priority in float64 is exact for float32 priorities
    # and rows below 2^28, so this is the order of a stable sort by row of the priority order
    order = torch.argsort(rows.to(torch.float64) + priority.to(torch.float64))
    sorted_rows = rows[order]
    counts = torch.bincount(sorted_rows, minlength=num_rows)
    starts = torch.cumsum(counts, 0) - counts
    return order, torch.arange(rows.numel(), device=rows.device) - starts[sorted_rows]


def sample_rows(matrix: Tensor, fanout: int, generator: torch.Generator | None) -> Tensor:
    """``sample_f``: keep at most ``fanout`` entries of every row, drawn uniformly without
    replacement (random keys, then the ``fanout`` smallest keys of each row)."""
    rows, cols, _ = _entries(matrix)
    order, rank = _random_rank_in_row(rows, matrix.shape[0], generator)
    chosen = order[rank < fanout]
    return _csr(rows[chosen], cols[chosen], tuple(matrix.shape))


def cap_rows(keys: Tensor, shape: tuple[int, int], room: Tensor,
             generator: torch.Generator | None) -> Tensor:
    """``cap``: of the sorted flat keys ``b * N + i``, keep at most ``room[b]`` per row b,
    drawn uniformly without replacement; the kept keys, sorted."""
    rows = torch.div(keys, shape[1], rounding_mode="floor")
    order, rank = _random_rank_in_row(rows, shape[0], generator)
    chosen = order[rank < room[rows[order]]]
    return torch.sort(keys[chosen]).values


def expand(adjacency: Tensor, frontier: Tensor, hops: int,
           fanout: Sequence[int] | None = None,
           generator: torch.Generator | None = None,
           max_nodes: int | None = None) -> list[Tensor]:
    """Frontiers ``[F_0, ..., F_L]`` (k x N CSR patterns) of L = ``hops`` expansions.

    ``fanout[l]`` (when given and > 0) caps the neighbours drawn per frontier hit at hop l;
    ``max_nodes`` (when given) the hits of each row over all hops (the targets always stay).
    """
    return [_csr_from_keys(keys, tuple(frontier.shape))
            for keys in _expand_keys(adjacency, frontier, hops, fanout, generator, max_nodes)]


def _expand_keys(adjacency: Tensor, frontier: Tensor, hops: int,
                 fanout: Sequence[int] | None,
                 generator: torch.Generator | None,
                 max_nodes: int | None = None) -> list[Tensor]:
    """The frontiers of :func:`expand` as sorted flat keys ``b * N + i``."""
    if hops < 0:
        raise ValueError(f"hops must be >= 0, got {hops}")
    if fanout is not None and len(fanout) not in (0, hops):
        raise ValueError(f"fanout needs one entry per hop ({hops}), got {list(fanout)}")
    if max_nodes is not None and max_nodes < 1:
        raise ValueError(f"max_nodes must be >= 1, got {max_nodes}")
    shape = tuple(frontier.shape)
    keys = _nonzero_keys(frontier)
    frontiers, visited = [keys], keys
    size = torch.bincount(torch.div(keys, shape[1], rounding_mode="floor"),
                          minlength=shape[0])                                 # |V_l| per row
    for hop in range(hops):
        limit = fanout[hop] if fanout else 0
        if limit > 0:
            rows, cols, _ = _entries(frontier)
            pairs = torch.arange(rows.numel(), device=rows.device)
            h = _csr(pairs, cols, (rows.numel(), shape[1]))                   # H_l
            r = _csr(rows, pairs, (shape[0], rows.numel()))                   # R_l
            reached = torch.sparse.mm(r, sample_rows(torch.sparse.mm(h, adjacency), limit,
                                                     generator))
        else:
            reached = torch.sparse.mm(frontier, adjacency)                    # F_l A
        keys = _nonzero_keys(reached)
        keys = keys[~torch.isin(keys, visited)]                              # o (1 - V_l)
        if max_nodes is not None:
            keys = cap_rows(keys, shape, (max_nodes - size).clamp_min(0), generator)
            size += torch.bincount(torch.div(keys, shape[1], rounding_mode="floor"),
                                   minlength=shape[0])
        frontier = _csr_from_keys(keys, shape)
        visited = torch.cat([visited, keys])
        frontiers.append(keys)
    return frontiers


def node_sets(frontiers: Sequence[Tensor]) -> Tensor:
    """``V_L = sum_l F_l`` as a k x N CSR pattern (the frontiers are disjoint)."""
    keys = torch.sort(torch.cat([_nonzero_keys(f) for f in frontiers])).values
    return _csr_from_keys(keys, tuple(frontiers[0].shape))


def sample_subgraphs(data: Record, targets: Sequence[Tensor], hops: int,
                     fanout: Sequence[int] | None = None,
                     generator: torch.Generator | None = None,
                     adjacency: Tensor | None = None, incidence: Tensor | None = None,
                     node_keys: Sequence[str] = NODE_KEYS,
                     edge_keys: Sequence[str] = EDGE_KEYS,
                     max_nodes: int | None = None) -> list[Record]:
    """One minibatch ``Record`` per entry of ``targets`` (bulk: all from the same products).

    Each record has ``edge_index`` (relabelled into ``node_ids`` order), the ``node_keys`` rows
    and ``edge_keys`` entries of ``data`` that exist, ``node_ids`` / ``edge_ids`` (original
    ids, ascending), ``target_ids``, ``target_edge_mask`` and ``num_nodes``. ``adjacency`` (A) and
    ``incidence`` (S^T) may be passed in when the same event is sampled again.
    ``max_nodes`` bounds the hits of every minibatch (module docstring).
    """
    if not len(targets):
        return []
    num_nodes, edge_index = int(data.num_nodes), data.edge_index.long()
    if adjacency is None:
        adjacency = symmetric_adjacency(edge_index, num_nodes)
    if incidence is None:
        incidence = source_incidence_transposed(edge_index, num_nodes)
    k = len(targets)
    f0 = target_matrix(targets, num_nodes)
    node_flat = torch.sort(torch.cat(_expand_keys(adjacency, f0, hops, fanout, generator,
                                                  max_nodes))).values          # V_L keys
    node_rows = torch.div(node_flat, num_nodes, rounding_mode="floor")
    node_cols = node_flat - node_rows * num_nodes
    member, leaving = _gather_rows(incidence, node_cols)                  # V_L S^T
    edge_rows = node_rows[member]
    inside = _member(node_flat, edge_rows * num_nodes + edge_index[1, leaving])  # o V_L D^T
    edge_keys_flat = torch.sort(edge_rows[inside] * edge_index.shape[1]
                                + leaving[inside]).values
    edge_rows = torch.div(edge_keys_flat, max(edge_index.shape[1], 1), rounding_mode="floor")
    edge_cols = edge_keys_flat - edge_rows * edge_index.shape[1]
    # relabelling: a member's position within its minibatch is its rank among the sorted
    # member keys less the minibatch's first rank (searchsorted: no k x N table)
    node_start = torch.cumsum(torch.bincount(node_rows, minlength=k), 0)
    node_start = torch.cat([node_start.new_zeros(1), node_start[:-1]])
    base = edge_rows * num_nodes
    src, dst = base + edge_index[0, edge_cols], base + edge_index[1, edge_cols]
    local = torch.stack([torch.searchsorted(node_flat, src), torch.searchsorted(node_flat, dst)]
                        ) - node_start[edge_rows]
    target_keys = _nonzero_keys(f0)
    touches = _member(target_keys, src) | _member(target_keys, dst)
    n_nodes = torch.bincount(node_rows, minlength=k).tolist()
    n_edges = torch.bincount(edge_rows, minlength=k).tolist()
    node_parts = torch.split(node_cols, n_nodes)
    edge_parts = torch.split(edge_cols, n_edges)
    local_parts = torch.split(local, n_edges, dim=1)
    mask_parts = torch.split(touches, n_edges)
    records = []
    for b in range(k):
        record = Record(edge_index=local_parts[b], node_ids=node_parts[b],
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
