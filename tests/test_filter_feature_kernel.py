"""The filter's compiled edge features (trkx.filter.feature_kernels, the CPU's path) against
the torch rows (trkx.filter.features.torch_rows, the GPU's path) evaluated in float64: the
kernel computes in float64 and rounds once, so the two agree to a float32 rounding on every
column, including the edges where the math has branches (a phi difference across +-pi, equal
radii, hits above one another)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

import trkx.filter.features as features_module
from trkx.data.detector import load_detector
from trkx.data.events import event_record
from trkx.filter.features import (
    compiled,
    edge_feature_count,
    edge_features,
    hit_table,
    torch_rows,
)
from trkx.filter.inference import score_edges
from trkx.filter.model import FilterMLP

pytest.importorskip("numba")


@pytest.fixture(scope="module")
def record(sample_prefix: Path):
    """A slice of the sample event with cells, random edges among its hits plus the branch
    cases: a phi difference across +-pi, equal radii, equal (x, y)."""
    full = event_record(str(sample_prefix), load_detector(), use_cells=True,
                        signal_pt_min=1.0, with_truth=False)
    hits = 3000
    x, pos = full.x[:hits].clone(), full.pos[:hits].clone()
    pos[1] = pos[0] * torch.tensor([1.0, 1.0, 0.5])              # above hit 0 (dx = dy = 0)
    pos[2] = torch.tensor([pos[0, 0], 3.1, pos[0, 2]])          # hit 0's radius
    pos[3] = torch.tensor([pos[0, 0] + 30.0, -3.1, pos[0, 2]])  # across +-pi from hit 2
    generator = torch.Generator().manual_seed(0)
    random = torch.randint(0, hits, (2, 20_000), generator=generator)
    special = torch.tensor([[0, 0, 2, 3, 1], [1, 2, 3, 2, 0]])
    return x, pos, torch.cat([special, random], dim=1), list(full.feature_names)


@pytest.mark.parametrize("cells, trajectory", [(True, True), (True, False), (False, True),
                                               (False, False)])
def test_kernel_matches_the_torch_rows_in_float64(record, cells: bool,
                                                  trajectory: bool) -> None:
    x, pos, edges, names = record
    names = names if cells else None
    hit_features = x.shape[1] if cells else 3
    assert compiled(x)
    ours = edge_features(x, pos, edges, names, hit_features, trajectory)
    exact = torch_rows(x.double(), pos.double(), edges, names, hit_features, trajectory)
    assert ours.shape == exact.shape == (edges.shape[1],
                                         edge_feature_count(hit_features, cells, trajectory))
    assert ours.dtype == torch.float32
    torch.testing.assert_close(ours, exact, rtol=2e-7, atol=2e-7)
    # float32 torch rows agree to their own rounding (cancellation in the differences)
    torch.testing.assert_close(ours, torch_rows(x, pos, edges, names, hit_features,
                                                trajectory), rtol=1e-3, atol=1e-3)
    # the branch cases, by hand: the phi difference across +-pi wraps, equal radii clip
    h = hit_features
    assert ours[3, 2 * h + 1] == pytest.approx((3.1 - (-3.1) - 2 * math.pi) / math.pi, abs=1e-6)
    if trajectory:
        slope = 2 * h + 4 + (4 if cells else 0) + 1
        assert ours[1, slope] == pytest.approx(2.0) or ours[1, slope] == pytest.approx(-2.0)


def test_buffer_reuse_and_its_errors(record) -> None:
    x, pos, edges, names = record
    table = hit_table(x, pos, names)
    count = edge_feature_count(x.shape[1], True, True)
    buffer = torch.full((1000, count), float("nan"))
    part = edge_features(x, pos, edges[:, :700], names, trajectory=True, table=table,
                         out=buffer)
    assert part.data_ptr() == buffer.data_ptr() and part.shape == (700, count)
    torch.testing.assert_close(part, edge_features(x, pos, edges[:, :700], names,
                                                   trajectory=True))
    assert edge_features(x, pos, edges[:, :0], names, trajectory=True).shape == (0, count)
    with pytest.raises(ValueError, match=rf"out must be \[>= 1001, {count}\] float32"):
        edge_features(x, pos, edges[:, :1001], names, trajectory=True, out=buffer)


def test_scores_of_both_paths_agree(record, monkeypatch) -> None:
    """The filter's scores from the compiled features and from the torch rows (forced, as on
    a GPU) agree, chunked or not."""
    x, pos, edges, names = record
    from trkx.data.record_type import Record

    torch.manual_seed(0)
    network = FilterMLP(x.shape[1], cell_agreement=True, hidden=32, layers=2, trajectory=True)
    event = Record(x=x, pos=pos, edge_index=edges, feature_names=names, num_nodes=len(x))
    ours = score_edges(network, event, chunk_size=3000)
    monkeypatch.setattr(features_module, "COMPILED_DEVICES", ())
    assert not compiled(x)
    theirs = score_edges(network, event, chunk_size=None)
    torch.testing.assert_close(ours, theirs, rtol=1e-6, atol=1e-6)
