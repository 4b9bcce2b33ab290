"""Radius graph in embedding space: which hits to connect for the later stages.

Given embeddings ``e_i`` (one row per hit), a radius ``R`` and a cap ``k``:

    P_i = the (at most) k nearest hits j != i with |e_i - e_j| < R     (hit i's proposals)
    E   = { {i, j} : j in P_i  or  i in P_j }                          (each pair once)

or, with ``layer`` given (``other_layers_only``), the k nearest among the hits of another layer,

    P_i = the (at most) k nearest hits j with |e_i - e_j| < R and layer_j != layer_i,

found by the search itself (``bucket`` and ``torch`` skip the hits of the query's own layer
as they go; the other backends search the 2k nearest and keep the other layers' among them,
which can miss some when more than k of those share the query's layer). This spends k on the
hits a track can continue to (a track crosses a layer once; same-layer signal pairs, from
overlapping modules, are < 0.1% of the truth graph's). Every pair is directed from the inner to
the outer hit: by radius ``r``, then ``|z|``, then the hit index (so the order is total and
deterministic). Without positions the pair is directed from the lower to the higher index.
Every hit proposes at most ``k`` partners, so ``|E| <= N k``; a hit can still have more than
``k`` edges when others propose it.

Backends (each returns exactly this set when it finds the true neighbours; layers: above):

- ``bucket``: kd-tree of 64-point buckets on the principal axes, searched by a numba kernel
  (trkx.embedding.bucket_search), exact; the fastest CPU search measured (about 2x cKDTree at
  119k hits, k = 32; benchmarks/graph_construction.py --embedding);
- ``kdtree``: scipy ``cKDTree.query(k+1, distance_upper_bound=R)``, exact;
- ``faiss_flat``: FAISS exact flat L2 k-NN search, chunked over queries;
- ``faiss_hnsw`` / ``faiss_ivf``: approximate FAISS indices (recall < 1);
- ``torch``: chunked ``torch.cdist`` + ``topk``, exact, on the tensor's device (GPU without
  faiss-gpu);
- ``faiss_gpu``: FAISS GPU flat index (needs a faiss build that sees a GPU);
- ``auto``: ``faiss_gpu`` for CUDA tensors when faiss sees a GPU, else ``torch`` for CUDA
  tensors, else ``bucket`` (``kdtree`` if numba is not importable).

Memory is bounded by chunking the queries: at most ``chunk_size`` query rows are searched at a
time (for ``torch``, the chunk is sized so that the distance block stays under
``max_block_bytes``).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from trkx.runtime.device import numba_importable

BACKENDS: tuple[str, ...] = ("auto", "bucket", "kdtree", "faiss_flat", "faiss_hnsw", "faiss_ivf",
                             "torch", "faiss_gpu")

#: Points per bucket of the ``bucket`` backend (64 was fastest at 119k hits in 12 dimensions).
BUCKET_SIZE = 64

# A neighbour table: [N, k'] int64 indices (-1 padded; at most k valid entries per row).
NeighbourSearch = Callable[[np.ndarray, float, int], np.ndarray]


def _as_float32(embedding: torch.Tensor | np.ndarray) -> np.ndarray:
    if isinstance(embedding, torch.Tensor):
        embedding = embedding.detach().cpu().numpy()
    return np.ascontiguousarray(embedding, dtype=np.float32)


def _kdtree_search(points: np.ndarray, radius: float, k: int, chunk_size: int,
                   workers: int) -> np.ndarray:
    from scipy.spatial import cKDTree

    tree = cKDTree(points)
    tables = []
    for start in range(0, len(points), chunk_size):
        query = points[start:start + chunk_size]
        dist, idx = tree.query(query, k=k + 1, distance_upper_bound=radius, workers=workers)
        idx = idx.reshape(len(query), k + 1).astype(np.int64)
        dist = dist.reshape(len(query), k + 1)
        idx[~np.isfinite(dist)] = -1
        tables.append(_drop_self_offset(idx, dist, radius, k, start))
    return np.concatenate(tables) if tables else np.zeros((0, k), np.int64)


def _drop_self_offset(idx: np.ndarray, dist: np.ndarray, radius: float, k: int,
                      start: int) -> np.ndarray:
    """Mask a nearest-first [rows, k+1] chunk (query rows from ``start``) to hit i's proposals.

    Self, missing entries and entries at distance >= radius become -1; of the rest the first
    ``k`` (nearest) are kept. The table keeps k+1 columns (-1 padded): no compaction needed.
    """
    rows = start + np.arange(idx.shape[0])[:, None]
    valid = (idx >= 0) & (idx != rows) & (dist < radius)
    valid &= np.cumsum(valid, axis=1) <= k
    return np.where(valid, idx, -1)


def _faiss_search(index, points: np.ndarray, radius: float, k: int,
                  chunk_size: int) -> np.ndarray:
    """Chunked k+1-NN with a FAISS L2 index (which returns squared distances)."""
    tables = []
    for start in range(0, len(points), chunk_size):
        query = points[start:start + chunk_size]
        dist2, idx = index.search(query, k + 1)
        dist = np.sqrt(np.maximum(dist2, 0.0))
        tables.append(_drop_self_offset(idx.astype(np.int64), dist, radius, k, start))
    return np.concatenate(tables) if tables else np.zeros((0, k), np.int64)


def _faiss_index(points: np.ndarray, backend: str, hnsw_m: int, hnsw_ef_search: int,
                 ivf_lists: int, ivf_probe: int):
    import faiss

    dim = points.shape[1]
    if backend == "faiss_flat":
        index = faiss.IndexFlatL2(dim)
    elif backend == "faiss_hnsw":
        index = faiss.IndexHNSWFlat(dim, hnsw_m)
        index.hnsw.efSearch = hnsw_ef_search
    elif backend == "faiss_ivf":
        lists = max(1, min(ivf_lists, len(points) // 39))
        index = faiss.IndexIVFFlat(faiss.IndexFlatL2(dim), dim, lists)
        index.train(points)
        index.nprobe = min(ivf_probe, lists)
    elif backend == "faiss_gpu":
        if faiss.get_num_gpus() == 0 or not hasattr(faiss, "StandardGpuResources"):
            raise RuntimeError("backend 'faiss_gpu': this faiss build sees no GPU "
                               "(install faiss-gpu-cu12, or use backend 'torch')")
        resources = faiss.StandardGpuResources()
        index = faiss.GpuIndexFlatL2(resources, dim)
    else:  # pragma: no cover - guarded by build_edges
        raise ValueError(backend)
    index.add(points)
    return index


def _torch_search(embedding: torch.Tensor, radius: float, k: int, max_block_bytes: int,
                  groups: torch.Tensor | None = None) -> torch.Tensor:
    """Exact chunked search on the tensor's own device, [N, k] nearest first, -1 padded.

    Per block of query rows: the distances to every point (``cdist``), those to the query's
    own group (``groups`` [N]: its layer; without groups, itself alone) set to infinity, the
    pairs within the radius taken (``nonzero``: about as many as the graph's edges, where a
    top-k would rank all N columns of every row), and of each row's pairs the k nearest kept
    (stable sorts: by distance, then by row; ties at the k-th distance go to the lower index).
    A block holds ``max_block_bytes`` of distances and mask; its pairs take up to 4x that
    when nearly every pair is within the radius."""
    n = embedding.shape[0]
    points = embedding.detach().float()
    device = points.device
    own = None if groups is None else groups.to(device=device, dtype=torch.int64)
    table = torch.full((n, k), -1, dtype=torch.int64, device=device)
    rows_per_block = max(1, int(max_block_bytes // max(1, 5 * n)))    # distances + mask
    for start in range(0, n, rows_per_block):
        query = points[start:start + rows_per_block]
        dist = torch.cdist(query, points)
        if own is None:      # itself alone: its diagonal entry, not a pass over the block
            rows = torch.arange(len(query), device=device)
            dist[rows, rows + start] = float("inf")
        else:
            dist.masked_fill_(own[start:start + len(query), None] == own[None, :],
                              float("inf"))
        row, col = torch.nonzero(dist < radius, as_tuple=True)
        order = torch.argsort(dist[row, col], stable=True)
        order = order[torch.argsort(row[order], stable=True)]
        row, col = row[order], col[order]
        counts = torch.bincount(row, minlength=len(query))
        slot = torch.arange(len(row), device=device) - (torch.cumsum(counts, 0) - counts)[row]
        keep = slot < k
        table[start + row[keep], slot[keep]] = col[keep]
    return table


def resolve_backend(backend: str, embedding: torch.Tensor | np.ndarray) -> str:
    """The concrete backend ``auto`` stands for, given where the embedding lives."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown graph backend {backend!r}; expected one of "
                         f"{', '.join(BACKENDS)}")
    if backend != "auto":
        return backend
    if isinstance(embedding, torch.Tensor) and embedding.is_cuda:
        return "faiss_gpu" if faiss_sees_gpu() else "torch"
    return "bucket" if numba_importable() else "kdtree"


def faiss_sees_gpu() -> bool:
    """Whether an installed faiss build can search on a GPU (False without faiss)."""
    try:
        import faiss
    except ImportError:      # faiss is optional on CUDA machines: the torch search serves
        return False
    return hasattr(faiss, "StandardGpuResources") and faiss.get_num_gpus() > 0


def _check_search_arguments(radius: float, max_neighbours: int,
                            embedding: torch.Tensor | np.ndarray) -> None:
    if radius <= 0:
        raise ValueError(f"radius must be > 0, got {radius}")
    if max_neighbours < 1:
        raise ValueError(f"max_neighbours must be >= 1, got {max_neighbours}")
    if embedding.ndim != 2:
        raise ValueError(f"embedding must be [N, d], got shape {tuple(embedding.shape)}")


def neighbour_table(embedding: torch.Tensor | np.ndarray, radius: float, max_neighbours: int,
                    backend: str = "auto", *, chunk_size: int = 16384, workers: int = -1,
                    hnsw_m: int = 32, hnsw_ef_search: int = 64, ivf_lists: int = 1024,
                    ivf_probe: int = 16, max_block_bytes: int = 256 << 20,
                    bucket_size: int = BUCKET_SIZE, groups: np.ndarray | None = None,
                    ) -> np.ndarray:
    """The proposal table ``P`` of the module docstring: [N, k'] int64, -1 padded, at most
    ``max_neighbours`` valid entries per row; with ``groups`` [N] (the layer of each hit),
    the nearest of the other groups only (``bucket`` and ``torch`` mask the own group inside
    the search; the other backends search the 2k nearest and select: :func:`other_layer_table`)."""
    _check_search_arguments(radius, max_neighbours, embedding)
    backend = resolve_backend(backend, embedding)
    k = int(max_neighbours)
    if groups is not None and backend not in ("bucket", "torch"):
        table = neighbour_table(embedding, radius, 2 * k, backend, chunk_size=chunk_size,
                                workers=workers, hnsw_m=hnsw_m, hnsw_ef_search=hnsw_ef_search,
                                ivf_lists=ivf_lists, ivf_probe=ivf_probe)
        return other_layer_table(table, _as_float32(embedding), np.asarray(groups), k)
    if backend == "torch":
        tensor = embedding if isinstance(embedding, torch.Tensor) else torch.from_numpy(
            np.asarray(embedding, np.float32))
        # searched on the embedding's device; the table [N, k+1] goes to the CPU once, for
        # the numba pair kernel of table_to_edges
        return _torch_search(tensor, radius, k, max_block_bytes,
                             None if groups is None else torch.as_tensor(groups),
                             ).cpu().numpy()
    # The other backends are CPU libraries (numba, scipy, FAISS): a CUDA embedding is copied
    # to the CPU once here ([N, d] float32). faiss_gpu copies it back to its own GPU index
    # (it takes numpy arrays; faiss.contrib.torch_utils could skip the copies, not yet measured).
    points = _as_float32(embedding)
    if len(points) == 0:
        return np.zeros((0, k), np.int64)
    if backend == "kdtree":
        return _kdtree_search(points, radius, k, chunk_size, workers)
    if backend == "bucket":
        return _bucket_search(points, radius, k, bucket_size, workers, groups)[0]
    index = _faiss_index(points, backend, hnsw_m, hnsw_ef_search, ivf_lists, ivf_probe)
    return _faiss_search(index, points, radius, k, chunk_size)


def _bucket_search(points: np.ndarray, radius: float, k: int, bucket_size: int, workers: int,
                   groups: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """The ``bucket`` backend's table and its squared distances (trkx.embedding.bucket_search)."""
    from trkx.embedding.bucket_search import bucket_neighbours

    return bucket_neighbours(points, radius, k, bucket_size,
                             threads=None if workers < 0 else workers, groups=groups,
                             distances=True)


def inner_to_outer_rank(pos: torch.Tensor | np.ndarray | None, n: int) -> np.ndarray:
    """Rank of every hit in the order (r, |z|, index); ``pos`` is [N, 3] = (r, phi, z)."""
    if pos is None:
        return np.arange(n)
    pos = pos.detach().cpu().numpy() if isinstance(pos, torch.Tensor) else np.asarray(pos)
    if pos.shape[0] != n:
        raise ValueError(f"pos has {pos.shape[0]} rows but the embedding has {n}")
    order = np.lexsort((np.arange(n), np.abs(pos[:, 2]), pos[:, 0]))
    rank = np.empty(n, np.int64)
    rank[order] = np.arange(n)
    return rank


def _block_bytes(embedding: torch.Tensor) -> int:
    """The torch search's distance block: 256 MiB on the CPU; on a GPU an eighth of its free
    memory, at most 4 GiB (on an H200, 120k points at k = 96: 0.45 s in 256 MiB blocks,
    0.21 s in 4 GiB ones: fewer, larger kernels)."""
    if not embedding.is_cuda:
        return 256 << 20
    free, _ = torch.cuda.mem_get_info(embedding.device)
    return int(min(4 << 30, max(256 << 20, free // 8)))


def _rank_torch(pos: torch.Tensor, n: int) -> torch.Tensor:
    """:func:`inner_to_outer_rank` on ``pos``'s device: stable sorts by |z|, then by r."""
    order = torch.argsort(pos[:, 2].abs(), stable=True)
    order = order[torch.argsort(pos[order, 0], stable=True)]
    rank = torch.empty(n, dtype=torch.int64, device=pos.device)
    rank[order] = torch.arange(n, device=pos.device)
    return rank


def _table_to_edges_torch(table: torch.Tensor, rank: torch.Tensor) -> torch.Tensor:
    """:func:`table_to_edges` on the table's device (the torch search's): the same unique
    inner -> outer pairs in the same (inner, outer) order, by a sort of the pair keys."""
    n, k = table.shape
    src = torch.arange(n, device=table.device).repeat_interleave(k)
    dst = table.reshape(-1)
    keep = dst >= 0
    src, dst = src[keep], dst[keep]
    forward = rank[src] < rank[dst]
    keys = torch.unique(torch.where(forward, src, dst) * n + torch.where(forward, dst, src))
    return torch.stack([keys // n, keys % n])


def table_to_edges(table: np.ndarray, rank: np.ndarray,
                   distances: np.ndarray | None = None) -> np.ndarray:
    """Unique directed pairs [2, E] (inner -> outer by ``rank``) from a proposal table, ordered
    by (inner, outer); compiled (trkx.embedding.bucket_search) when numba is importable, which
    uses ``distances`` (the exact search's squared distances, when given) to skip most of the
    mutual-proposal scans: the same pairs."""
    if numba_importable():
        from trkx.embedding.bucket_search import unique_directed_pairs

        return unique_directed_pairs(table, rank, distances)
    return _table_to_edges_numpy(table, rank)


def _table_to_edges_numpy(table: np.ndarray, rank: np.ndarray) -> np.ndarray:
    n, k = table.shape
    src = np.repeat(np.arange(n, dtype=np.int64), k)
    dst = table.reshape(-1)
    keep = dst >= 0
    src, dst = src[keep], dst[keep]
    forward = rank[src] < rank[dst]
    inner = np.where(forward, src, dst)
    outer = np.where(forward, dst, src)
    keys = np.sort(inner * n + outer)  # sort + adjacent compare: faster than np.unique here
    if len(keys):
        keys = keys[np.concatenate([[True], keys[1:] != keys[:-1]])]
    return np.stack([keys // n, keys % n]).astype(np.int64)


def other_layer_table(table: np.ndarray, points: np.ndarray, layer: np.ndarray, k: int,
                      chunk_size: int = 16384) -> np.ndarray:
    """Row i keeps the (at most) ``k`` nearest proposals j of ``table`` (any order, -1 padded)
    with ``layer[j] != layer[i]``, nearest first, -1 padded to k columns (rows in chunks of
    ``chunk_size``, so the distance block stays small)."""
    out = np.full((len(table), k), -1, np.int64)
    for start in range(0, len(table), chunk_size):
        rows = table[start:start + chunk_size]
        valid = rows >= 0
        safe = np.where(valid, rows, 0)
        keep = valid & (layer[safe] != layer[start:start + len(rows), None])
        gap = points[safe] - points[start:start + len(rows), None, :]
        distance = np.where(keep, np.einsum("nkd,nkd->nk", gap, gap), np.inf)
        order = np.argsort(distance, axis=1, kind="stable")[:, :k]
        nearest = np.take_along_axis(rows, order, 1)
        found = np.isfinite(np.take_along_axis(distance, order, 1))
        out[start:start + len(rows), :order.shape[1]] = np.where(found, nearest, -1)
    return out


def build_edges(embedding: torch.Tensor | np.ndarray, radius: float, max_neighbours: int,
                backend: str = "auto", *, pos: torch.Tensor | np.ndarray | None = None,
                layer: torch.Tensor | np.ndarray | None = None,
                **search_options) -> torch.Tensor:
    """Candidate edges ``[2, E]`` (int64, on the embedding's device) of the module docstring.

    ``pos`` [N, 3] = (r, phi, z) sets the inner -> outer direction; ``layer`` [N] (one integer
    per detector layer), when given, restricts each hit's proposals to other layers (inside
    the search: :func:`neighbour_table`'s ``groups``); ``search_options`` go to
    :func:`neighbour_table` (chunk size, HNSW/IVF parameters, ...).
    """
    n = embedding.shape[0]
    if layer is not None:
        if tuple(layer.shape) != (n,):
            raise ValueError(f"layer must have one entry per hit ({n}), got "
                             f"{tuple(layer.shape)}")
    if resolve_backend(backend, embedding) == "torch" and isinstance(embedding, torch.Tensor) \
            and (pos is None or isinstance(pos, torch.Tensor)) and n > 0:
        # search and de-duplication on the embedding's device: nothing goes to the host
        _check_search_arguments(radius, max_neighbours, embedding)
        table = _torch_search(embedding, radius, int(max_neighbours),
                              search_options.get("max_block_bytes", _block_bytes(embedding)),
                              None if layer is None else torch.as_tensor(layer))
        rank = (torch.arange(n, device=embedding.device) if pos is None
                else _rank_torch(pos.to(embedding.device).float(), n))
        return _table_to_edges_torch(table, rank)
    if layer is not None:
        layer = layer.cpu().numpy() if isinstance(layer, torch.Tensor) else np.asarray(layer)
    squared = None       # the bucket search's distances let the pair kernel skip most scans
    if resolve_backend(backend, embedding) == "bucket" and n > 0:
        _check_search_arguments(radius, max_neighbours, embedding)
        table, squared = _bucket_search(
            _as_float32(embedding), radius, int(max_neighbours),
            search_options.get("bucket_size", BUCKET_SIZE), search_options.get("workers", -1),
            layer)
    else:
        table = neighbour_table(embedding, radius, max_neighbours, backend, groups=layer,
                                **search_options)
    # Unique inner -> outer pairs: a numba kernel (counting sort of the pairs) on the CPU
    # whatever the device, and the (r, |z|) rank; the edges move to the embedding's device once.
    edges = torch.from_numpy(table_to_edges(table, inner_to_outer_rank(pos, n), squared))
    if isinstance(embedding, torch.Tensor):
        edges = edges.to(embedding.device)
    return edges
