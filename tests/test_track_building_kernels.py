"""The track builder's batched and compiled searches give what the plain ones gave: the ball
search of the extension and the swap (trkx.tracks.builder.ball_kernels) a k-d tree's sorted
ball query, the swap's one batched fit (layer_swap._fits_without_layer) the fits of each
(layer, track) alone, and a track table with hits of no track (negative ids, the second
pass's candidate table) the rows of a table where those hits are tracks of their own."""

from __future__ import annotations

from itertools import chain

import numpy as np
import pytest
from scipy.spatial import cKDTree

from trkx.data.detector import PIXEL_VOLUMES, load_detector
from trkx.data.events import event_record
from trkx.pipeline.reconstruct import Reconstructor
from trkx.tracks.builder.graph import graph_from_record
from trkx.tracks.builder.layer_swap import SWAP_MIN_HITS, _fits_without_layer
from trkx.tracks.builder.second_pass import second_candidates
from trkx.tracks.fit.helix_fit import fit_helices
from trkx.tracks.fit.track_table import track_table

pytest.importorskip("numba")
from trkx.tracks.builder.ball_kernels import ball_pairs, grid_side


def k_d_tree_pairs(points: np.ndarray, radii: np.ndarray, hits: np.ndarray):
    found = cKDTree(hits).query_ball_point(points, radii, return_sorted=True)
    length = np.array([len(f) for f in found], dtype=np.int64)
    return (np.repeat(np.arange(len(points)), length),
            np.fromiter(chain.from_iterable(found), dtype=np.int64, count=int(length.sum())))


@pytest.mark.parametrize("seed", range(6))
def test_ball_pairs_are_the_k_d_trees(seed: int) -> None:
    rng = np.random.default_rng(seed)
    hits = rng.normal(size=(2000, 3)) * [300.0, 300.0, 800.0]
    points = np.concatenate([hits[:300] + rng.normal(size=(300, 3)),   # near hits
                             rng.normal(size=(200, 3)) * 1500.0])      # some far outside
    radii = rng.uniform(0.5, 60.0, size=len(points))
    x, y, z = (np.ascontiguousarray(hits[:, i]) for i in range(3))
    for side in (grid_side(x, y, float(radii.min())), 7.0, 400.0):
        query, found = ball_pairs(points, radii, x, y, z, side)
        expected_query, expected_found = k_d_tree_pairs(points, radii, hits)
        np.testing.assert_array_equal(query, expected_query)
        np.testing.assert_array_equal(found, expected_found)
    assert len(expected_found) > 300


def test_ball_pairs_in_a_dense_cluster_are_the_k_d_trees() -> None:
    """Queries that find more hits than the in-place insertion sort takes (sorted by np.sort)
    beside ones that find a few."""
    from trkx.tracks.grid_kernels import INSERTION_SORT_MAX

    rng = np.random.default_rng(11)
    hits = np.concatenate([rng.uniform(-10, 10, size=(1500, 3)),
                           rng.normal(size=(500, 3)) * 200.0])
    points = np.concatenate([hits[:40] + rng.normal(size=(40, 3)),
                             hits[1500:1540] + rng.normal(size=(40, 3))])
    radii = np.concatenate([np.full(40, 6.0), rng.uniform(1.0, 40.0, size=40)])
    x, y, z = (np.ascontiguousarray(hits[:, i]) for i in range(3))
    query, found = ball_pairs(points, radii, x, y, z, grid_side(x, y, 6.0))
    expected_query, expected_found = k_d_tree_pairs(points, radii, hits)
    np.testing.assert_array_equal(query, expected_query)
    np.testing.assert_array_equal(found, expected_found)
    sizes = np.bincount(query, minlength=len(points))
    assert sizes.max() > INSERTION_SORT_MAX and (sizes[40:] <= INSERTION_SORT_MAX).all()


def test_the_grids_squares_hold_their_hits_by_z_then_index() -> None:
    """square_grid: each square's hits in z order, ties in index order (the merge sort's
    order), in sparse squares (insertion) and dense ones (more than INSERTION_SORT_MAX hits)."""
    from trkx.tracks.grid_kernels import INSERTION_SORT_MAX, square_grid

    rng = np.random.default_rng(7)
    x, y = rng.uniform(0, 100, 3000), rng.uniform(0, 100, 3000)
    z = np.round(rng.normal(0, 50, 3000))                  # ties in z
    for side in (3.0, 50.0):
        order, starts, x0, y0, _, ny = square_grid(x, y, z, side)
        cell = ((x - x0) // side).astype(np.int64) * ny + ((y - y0) // side).astype(np.int64)
        expected = np.lexsort((np.arange(len(x)), z, cell))
        np.testing.assert_array_equal(order, expected)
        sizes = np.diff(starts)
        assert (sizes.max() > INSERTION_SORT_MAX) == (side == 50.0)


def test_ball_pairs_of_nothing_are_empty() -> None:
    x = np.zeros(0)
    query, found = ball_pairs(np.zeros((3, 3)), np.ones(3), x, x, x, 1.0)
    assert len(query) == len(found) == 0
    one = np.array([1.0])
    query, found = ball_pairs(np.zeros((0, 3)), np.zeros(0), one, one, one, 1.0)
    assert len(query) == len(found) == 0


@pytest.fixture(scope="module")
def built_sample_event(sample_prefix):
    pipeline = Reconstructor(device="cpu").pipeline("pu200_cells")
    record = event_record(str(sample_prefix), load_detector(), pipeline.use_cells,
                          pipeline.signal_pt_min, with_truth=False)
    graphs, labels, _ = pipeline.run(record)
    return graphs["gnn"], np.asarray(labels, dtype=np.int64)


def test_the_swaps_batched_fit_is_each_layers_own(built_sample_event) -> None:
    record, labels = built_sample_event
    graph = graph_from_record(record)
    r, phi, z = (record.pos[:, i].double().numpy() for i in range(3))
    x, y, layer = r * np.cos(phi), r * np.sin(phi), np.asarray(graph.layer, dtype=np.int64)
    size = np.bincount(labels)
    keys = np.unique(layer[np.isin(layer // 1000, PIXEL_VOLUMES)])
    fit_layer, fit_track, frame = _fits_without_layer(labels, size, x, y, z, layer, keys,
                                                      SWAP_MIN_HITS)
    assert len(np.unique(fit_layer)) >= 8 and len(frame) > 500
    for key in keys:
        on = layer == key
        tracks = np.unique(labels[on & (size[labels] >= SWAP_MIN_HITS)])
        members = np.isin(labels, tracks) & ~on
        alone = fit_helices(np.where(members, labels, -1), x, y, z, layer // 1000).frame()
        mine = frame[fit_layer == key].assign(track_id=fit_track[fit_layer == key])
        assert list(mine["track_id"]) == list(alone["track_id"])
        for column in ("n_hits", "pt", "eta", "phi", "d0", "z0", "chi2_ndf"):
            np.testing.assert_array_equal(mine[column].to_numpy(), alone[column].to_numpy())


def test_a_table_with_hits_of_no_track_has_the_rows_of_their_own_tracks(built_sample_event):
    record, labels = built_sample_event
    graph = graph_from_record(record)
    pos = record.pos.double().numpy()
    candidates = second_candidates(labels, graph, pos, 0.3)
    n_candidates = int(candidates.max()) + 1
    assert n_candidates > 20 and (candidates < 0).sum() > len(candidates) // 2
    singles = candidates < 0
    own = candidates.copy()
    own[singles] = n_candidates + np.arange(int(singles.sum()))
    above = graph.score >= 0.3
    edges = (graph.src[above], graph.dst[above], graph.score[above])
    volume, layer_id = graph.layer // 1000, graph.layer % 1000
    ours = track_table(candidates, pos, volume, layer_id, *edges)
    theirs = track_table(own, pos, volume, layer_id, *edges)
    theirs = theirs[theirs["track_id"] < n_candidates].reset_index(drop=True)
    assert list(ours.columns) == list(theirs.columns)
    for column in ours.columns:
        np.testing.assert_allclose(ours[column].to_numpy(), theirs[column].to_numpy(),
                                   rtol=1e-12, atol=0, err_msg=column)
    assert (ours["leaving"] > 0).any() and (ours["ahead"] > 0).any()


@pytest.mark.parametrize("n", [0, 1, 5, 32, 33, 200])
def test_the_continuations_sort_unique_is_numpys_unique(n: int) -> None:
    """continuation_kernels._sort_unique: np.unique of the first n values, in place, for the
    counts that sort by insertion (<= INSERTION_SORT_MAX) and by a merge sort."""
    from trkx.tracks.fit.continuation_kernels import _sort_unique

    values = np.random.default_rng(n).integers(0, max(n // 3, 1), size=n + 7)
    expected = np.unique(values[:n])
    m = _sort_unique(values, n)
    np.testing.assert_array_equal(values[:m], expected)
