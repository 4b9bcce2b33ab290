"""build_edges against a brute-force radius graph on random points, for every CPU backend."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from trkx.embedding.graph import build_edges, resolve_backend

RADIUS = 0.35
K = 6


def _points(n: int = 600, dim: int = 4, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Clustered embeddings (so hits have several partners) and random (r, phi, z)."""
    rng = np.random.default_rng(seed)
    centres = rng.uniform(-1, 1, size=(n // 8, dim))
    points = centres[rng.integers(0, len(centres), n)] + rng.normal(0, 0.12, (n, dim))
    pos = np.stack([rng.choice([30.0, 70.0, 110.0], n),  # ties on r exercise the |z| rule
                    rng.uniform(-np.pi, np.pi, n), rng.uniform(-500, 500, n)], axis=1)
    return points.astype(np.float32), pos.astype(np.float32)


def _brute_force(points: np.ndarray, pos: np.ndarray, radius: float, k: int) -> set[tuple]:
    """The definition, literally: each hit proposes its k nearest others within the radius."""
    dist = np.linalg.norm(points[:, None, :] - points[None, :, :], axis=-1)
    np.fill_diagonal(dist, np.inf)
    pairs = set()
    for i in range(len(points)):
        for j in np.argsort(dist[i], kind="stable")[:k]:
            if dist[i, j] < radius:
                pairs.add((min(i, j), max(i, j)))

    def key(h: int) -> tuple:
        return (pos[h, 0], abs(pos[h, 2]), h)

    return {(a, b) if key(a) < key(b) else (b, a) for a, b in pairs}


EXACT = ["bucket", "kdtree", "faiss_flat", "torch"]
APPROXIMATE = ["faiss_hnsw", "faiss_ivf"]


@pytest.mark.parametrize("backend", EXACT + APPROXIMATE)
def test_build_edges_matches_brute_force(backend: str) -> None:
    points, pos = _points()
    expected = _brute_force(points, pos, RADIUS, K)
    assert len(expected) > 2 * len(points)  # the test graph is not trivially sparse
    edges = build_edges(torch.from_numpy(points), RADIUS, K, backend, pos=torch.from_numpy(pos),
                        chunk_size=97, ivf_lists=16, ivf_probe=16, max_block_bytes=4096,
                        bucket_size=8)
    assert edges.dtype == torch.int64 and edges.shape[0] == 2
    src, dst = edges.numpy()
    found = set(zip(src.tolist(), dst.tolist()))
    assert len(found) == edges.shape[1], "a pair appears twice"
    assert not np.any(src == dst), "self-loop"
    # Radius respected and direction inner -> outer (r, then |z|) on every edge.
    assert np.all(np.linalg.norm(points[src] - points[dst], axis=1) < RADIUS)
    r_s, r_d = pos[src, 0], pos[dst, 0]
    assert np.all((r_s < r_d) | ((r_s == r_d) & (np.abs(pos[src, 2]) <= np.abs(pos[dst, 2]))))
    # No reverse duplicates either.
    assert not (found & {(b, a) for a, b in found})
    recall = len(found & expected) / len(expected)
    if backend in EXACT:
        assert found == expected
    else:
        assert recall >= 0.99, f"{backend} recall {recall:.4f}"


def test_each_hit_proposes_at_most_k() -> None:
    """A dense blob: every hit has many partners within the radius but proposes only K."""
    rng = np.random.default_rng(1)
    points = rng.normal(0, 0.01, (200, 3)).astype(np.float32)
    edges = build_edges(points, 1.0, K, "kdtree")
    assert edges.shape[1] <= 200 * K
    assert edges.shape[1] >= 200 * K // 2


def test_without_positions_directs_by_index() -> None:
    points, _ = _points(200)
    src, dst = build_edges(points, RADIUS, K, "kdtree").numpy()
    assert np.all(src < dst)


def test_bad_arguments_are_named() -> None:
    points, _ = _points(50)
    with pytest.raises(ValueError, match="unknown graph backend 'annoy'"):
        build_edges(points, RADIUS, K, "annoy")
    with pytest.raises(ValueError, match="radius"):
        build_edges(points, 0.0, K)
    with pytest.raises(ValueError, match="pos has 3 rows"):
        build_edges(points, RADIUS, K, pos=np.zeros((3, 3)))


def test_auto_backend_on_cpu_is_the_bucket_search() -> None:
    assert resolve_backend("auto", torch.zeros(3, 2)) == "bucket"


def _table_pairs(table: np.ndarray) -> set[tuple[int, int]]:
    rows = np.repeat(np.arange(len(table)), table.shape[1])
    cols = table.reshape(-1)
    return set(zip(rows[cols >= 0].tolist(), cols[cols >= 0].tolist()))


@pytest.mark.parametrize("n, dim, radius, k, bucket, spread", [
    (3000, 12, 0.3, 32, 16, 0.05),   # dense clusters: the cap binds for most hits
    (3000, 12, 0.3, 32, 64, 0.05),
    (2000, 5, 0.2, 8, 7, 0.2),       # odd bucket size, sparse: many hits below the cap
    (2000, 3, 0.05, 4, 1, 0.3),      # one point per bucket
    (50, 12, 0.1, 6, 64, 0.1),       # everything in one bucket
])
def test_bucket_search_is_the_kdtree_table(n, dim, radius, k, bucket, spread) -> None:
    """Same proposals as cKDTree, row by row (not only the same edges)."""
    from trkx.embedding.graph import neighbour_table

    rng = np.random.default_rng(n + dim + k + bucket)
    centres = rng.normal(0, 1, (max(1, n // 40), dim))
    points = centres[rng.integers(0, len(centres), n)] + rng.normal(0, spread, (n, dim))
    points /= np.linalg.norm(points, axis=1, keepdims=True)  # on the unit sphere, as embedded
    points = points.astype(np.float32)
    reference = neighbour_table(points, radius, k, "kdtree")
    table = neighbour_table(points, radius, k, "bucket", bucket_size=bucket)
    assert table.shape == (n, k) and table.dtype == np.int64
    assert _table_pairs(table) == _table_pairs(reference)
    counts = (reference >= 0).sum(1)
    assert counts.max() == k and counts.min() < k  # both regimes are exercised


def test_bucket_search_edge_cases() -> None:
    from trkx.embedding.graph import neighbour_table

    assert neighbour_table(np.zeros((0, 12), np.float32), 0.1, 4, "bucket").shape == (0, 4)
    one = neighbour_table(np.ones((1, 12), np.float32), 0.1, 4, "bucket")
    assert one.shape == (1, 4) and np.all(one == -1)
    # Duplicated points: all at distance 0, the cap keeps k of the other copies.
    same = neighbour_table(np.zeros((10, 3), np.float32), 0.1, 4, "bucket", bucket_size=3)
    assert np.all((same >= 0).sum(1) == 4)
    assert not np.any(same == np.arange(10)[:, None])
    # Two points just inside and just outside the radius.
    pair = np.array([[0, 0], [0.0999, 0], [0.3, 0], [0.4001, 0]], np.float32)
    assert _table_pairs(neighbour_table(pair, 0.1, 3, "bucket")) == {(0, 1), (1, 0)}


def test_empty_and_isolated_inputs() -> None:
    assert build_edges(np.zeros((0, 4), np.float32), 0.1, 3, "kdtree").shape == (2, 0)
    far = np.eye(5, dtype=np.float32) * 10
    assert build_edges(far, 0.1, 3, "faiss_flat").shape == (2, 0)


@pytest.mark.parametrize("n, k, seed", [(0, 3, 0), (1, 2, 1), (40, 5, 2), (500, 12, 3)])
def test_compiled_table_to_edges_is_the_numpy_one(n, k, seed) -> None:
    """Random tables: one-sided and mutual proposals, -1 padding, repeats within a row."""
    from trkx.embedding.bucket_search import unique_directed_pairs
    from trkx.embedding.graph import _table_to_edges_numpy

    rng = np.random.default_rng(seed)
    table = rng.integers(-1, max(n, 1), (n, k))
    table[table == np.arange(n)[:, None]] = -1
    if n > 1:
        table[0, :2] = table[0, 0]  # a row naming a partner twice
    rank = rng.permutation(n)
    expected = _table_to_edges_numpy(table, rank)
    found = unique_directed_pairs(table, rank)
    assert found.dtype == np.int64 and found.shape == expected.shape
    assert np.array_equal(found, expected)


@pytest.mark.parametrize("k, duplicates", [(6, False), (6, True), (24, False)])
def test_pairs_by_distance_are_the_pairs_by_scan(k, duplicates) -> None:
    """The search's distances decide most mutual proposals (trkx.embedding.bucket_search): the
    same edges as scanning every partner's row, with rows full and not, other-layer groups and
    exact ties (duplicated points) at the k-th distance."""
    pytest.importorskip("numba")
    from trkx.embedding.bucket_kernels import keep_once, row_thresholds
    from trkx.embedding.bucket_search import bucket_neighbours, unique_directed_pairs
    from trkx.embedding.graph import _table_to_edges_numpy

    rng = np.random.default_rng(k + duplicates)
    centres = rng.normal(0, 1, (40, 8))
    points = centres[rng.integers(0, 40, 2000)] + rng.normal(0, 0.08, (2000, 8))
    if duplicates:
        points[1000:1400] = points[rng.integers(0, 1000, 400)]
    points = (points / np.linalg.norm(points, axis=1, keepdims=True)).astype(np.float32)
    groups = rng.integers(0, 5, 2000)
    table, squared = bucket_neighbours(points, 0.12, k, 16, groups=groups, distances=True)
    full = (table >= 0).sum(1) == k
    assert full.any() and not full.all()
    rank = rng.permutation(2000)
    scanned = keep_once(table, rank, np.zeros_like(squared), np.zeros(2000, np.float32), 1.0)
    by_distance = keep_once(table, rank, squared, row_thresholds(table, squared), 1e-5)
    assert np.array_equal(by_distance, scanned) and 0 < scanned.sum() < (table >= 0).sum()
    assert np.array_equal(unique_directed_pairs(table, rank, squared),
                          _table_to_edges_numpy(table, rank))


def test_compiled_pairs_do_not_depend_on_the_thread_count() -> None:
    """The counting sort runs one block of rows per numba thread: any count, the same edges."""
    numba = pytest.importorskip("numba")
    from trkx.embedding.bucket_search import unique_directed_pairs

    rng = np.random.default_rng(7)
    table = rng.integers(-1, 3000, (3000, 20))
    rank = rng.permutation(3000)
    before = numba.get_num_threads()
    try:
        found = []
        for threads in sorted({1, before}):
            numba.set_num_threads(threads)
            found.append(unique_directed_pairs(table, rank))
    finally:
        numba.set_num_threads(before)
    assert all(np.array_equal(f, found[0]) for f in found)
    assert found[0].shape[1] > 40_000


def _brute_force_other_layers(points: np.ndarray, pos: np.ndarray, layer: np.ndarray,
                              radius: float, k: int, among: int | None = None) -> set[tuple]:
    """The definition, literally: each hit's k nearest others within the radius on another
    layer (``among``: of its ``among`` nearest only, the fallback of the backends that cannot
    skip a layer while they search)."""
    dist = np.linalg.norm(points[:, None, :] - points[None, :, :], axis=-1)
    np.fill_diagonal(dist, np.inf)
    pairs = set()
    for i in range(len(points)):
        near = [j for j in np.argsort(dist[i], kind="stable")[:among or len(points)]
                if dist[i, j] < radius]
        for j in [j for j in near if layer[j] != layer[i]][:k]:
            pairs.add((min(i, j), max(i, j)))

    def key(h: int) -> tuple:
        return (pos[h, 0], abs(pos[h, 2]), h)

    return {(a, b) if key(a) < key(b) else (b, a) for a, b in pairs}


@pytest.mark.parametrize("backend", ["bucket", "kdtree", "torch"])
def test_other_layers_only_spends_k_on_other_layers(backend: str) -> None:
    points, pos = _points()
    # layers as bands of the embedding: a hit's nearest neighbours share its layer, so more
    # than k of its 2k nearest often do (where the exact search and the fallback differ)
    # (a radius wide enough to reach across the bands)
    layer = np.floor(points[:, 0] / 0.3).astype(np.int64)
    exact = _brute_force_other_layers(points, pos, layer, 2 * RADIUS, K)
    among_2k = _brute_force_other_layers(points, pos, layer, 2 * RADIUS, K, among=2 * K)
    assert len(exact) > len(among_2k) + 200
    expected = among_2k if backend == "kdtree" else exact
    edges = build_edges(torch.from_numpy(points), 2 * RADIUS, K, backend,
                        pos=torch.from_numpy(pos), layer=torch.from_numpy(layer),
                        chunk_size=97, bucket_size=8)
    src, dst = edges.numpy()
    assert not np.any(layer[src] == layer[dst]), "an edge within one layer"
    assert set(zip(src.tolist(), dst.tolist())) == expected
    plain = build_edges(torch.from_numpy(points), 2 * RADIUS, K, backend,
                        pos=torch.from_numpy(pos))
    cross = layer[plain[0].numpy()] != layer[plain[1].numpy()]
    assert edges.shape[1] > int(cross.sum())   # k spent elsewhere: more cross-layer pairs
    # one layer per hit: nothing is dropped, the plain k-nearest graph
    every = build_edges(torch.from_numpy(points), 2 * RADIUS, K, backend,
                        pos=torch.from_numpy(pos), layer=torch.arange(len(points)))
    assert torch.equal(every, plain)
    with pytest.raises(ValueError, match="one entry per hit"):
        build_edges(torch.from_numpy(points), RADIUS, K, backend, layer=layer[:-1])


@pytest.mark.parametrize("with_layers", [False, True])
def test_torch_search_and_device_pairs_equal_the_compiled_path(with_layers: bool) -> None:
    """The GPU's graph path (torch search, pairs de-duplicated by torch on the device) gives
    the compiled CPU path's edges in the same order: the same set, sorted by (inner, outer)."""
    points, pos = _points(n=900, seed=3)
    layer = torch.from_numpy(np.floor(points[:, 0] / 0.3).astype(np.int64)) if with_layers \
        else None
    kwargs = {"pos": torch.from_numpy(pos), "layer": layer}
    compiled = build_edges(torch.from_numpy(points), 2 * RADIUS, K, "bucket", **kwargs)
    on_device = build_edges(torch.from_numpy(points), 2 * RADIUS, K, "torch",
                            max_block_bytes=200_000, **kwargs)       # several blocks
    assert on_device.dtype == torch.int64 and compiled.shape[1] > 1000
    assert torch.equal(on_device, compiled)
    # without positions both direct each pair from the lower index
    assert torch.equal(build_edges(torch.from_numpy(points), RADIUS, K, "torch"),
                       build_edges(torch.from_numpy(points), RADIUS, K, "bucket"))
