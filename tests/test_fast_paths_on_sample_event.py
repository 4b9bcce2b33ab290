"""The fast CPU paths on a real event: the shipped cells set on the sample event gives, with the
fused MLPs (trkx.runtime.fused_mlp), the plain modules' filter and GNN scores to float32
rounding and the same tracks; the compiled helix fit (trkx.tracks.fit.helix_kernels) gives
the numpy fit's tracks, and the compiled continuation (trkx.tracks.fit.continuation_kernels) the
k-d tree's counts, from the same scored graph."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import trkx.tracks.fit.helix_fit as helix_fit
import trkx.tracks.fit.short_inputs as short_inputs
from trkx.data.detector import load_detector
from trkx.data.events import event_record
from trkx.pipeline.reconstruct import Reconstructor

pytest.importorskip("numba")


@pytest.fixture(scope="module")
def cells_pipeline_and_record(sample_prefix):
    pipeline = Reconstructor(device="cpu").pipeline("pu200_cells")
    record = event_record(str(sample_prefix), load_detector(), pipeline.use_cells,
                          pipeline.signal_pt_min, with_truth=False)
    return pipeline, record


def test_fused_scores_and_tracks_match_the_plain_modules(cells_pipeline_and_record):
    pipeline, record = cells_pipeline_and_record
    assert pipeline.fused
    fused_graphs, fused_labels, _ = pipeline.run(record)
    pipeline.fused = False
    try:
        plain_graphs, plain_labels, _ = pipeline.run(record)
    finally:
        pipeline.fused = True
    for stage in ("filter", "gnn"):
        assert torch.equal(fused_graphs[stage].edge_index, plain_graphs[stage].edge_index)
        difference = (fused_graphs[stage].scores - plain_graphs[stage].scores).abs().max()
        assert difference < 1e-5, (stage, float(difference))
    assert fused_graphs["gnn"].edge_index.shape[1] > 1000
    np.testing.assert_array_equal(fused_labels, plain_labels)
    assert len(np.unique(fused_labels[fused_labels >= 0])) > 50


def built_both_ways(pipeline, record, monkeypatch, module, switch: str):
    """The builder's (labels, track table) on the record's GNN graph with ``module.switch``
    True (compiled) and False (the reference), and the compiled labels checked equal."""
    graphs, _, _ = pipeline.run(record)
    built = {}
    for compiled in (True, False):
        monkeypatch.setattr(module, switch, compiled)
        built[compiled] = pipeline.builder.build_with_table(graphs["gnn"])
    np.testing.assert_array_equal(built[True][0], built[False][0])
    return built[True][1], built[False][1]


def test_compiled_helix_fit_gives_the_numpy_fits_tracks(cells_pipeline_and_record,
                                                           monkeypatch):
    ours, theirs = built_both_ways(*cells_pipeline_and_record, monkeypatch, helix_fit,
                                   "COMPILED_FIT")
    assert list(ours["track_id"]) == list(theirs["track_id"])
    # the curvature (what the fit measures) to 1e-5 / GeV on 99% of the tracks: the robust
    # steps carry last-bit differences furthest on the stiffest tracks (1 of 225 here moves by
    # 8e-5 / GeV at 46 GeV: 0.4% of its pT, below its resolution), none beyond 2e-4 / GeV
    difference = np.abs(1 / ours["pt"].to_numpy() - 1 / theirs["pt"].to_numpy())
    assert np.quantile(difference, 0.99) < 1e-5 and difference.max() < 2e-4, difference.max()


def test_compiled_continuation_gives_the_k_d_trees_counts(cells_pipeline_and_record,
                                                          monkeypatch):
    ours, theirs = built_both_ways(*cells_pipeline_and_record, monkeypatch, short_inputs,
                                   "COMPILED_CONTINUATION")
    assert (ours["ahead"] > 0).sum() > 5 and (ours["behind"] > 0).sum() > 0
    np.testing.assert_array_equal(ours["ahead"].to_numpy(), theirs["ahead"].to_numpy())
    np.testing.assert_array_equal(ours["behind"].to_numpy(), theirs["behind"].to_numpy())
