"""The trajectory edge inputs (z0, phislope, rphislope) on tracks whose values are known."""

from __future__ import annotations

import math

import pytest
import torch

from trkx.data.record_type import Record
from trkx.edges.geometry import SLOPE_CLIP, Z0_CLIP, edge_trajectory
from trkx.gnn.edge_inputs import edge_inputs, model_edge_inputs
from trkx.gnn.model import InteractionGNN

RADII_MM = torch.tensor([32.0, 72.0, 116.0, 172.0, 260.0, 360.0, 500.0, 660.0, 820.0, 1020.0],
                        dtype=torch.float64)


def chain(count: int) -> torch.Tensor:
    return torch.stack([torch.arange(count - 1), torch.arange(1, count)])


def test_a_straight_track_from_a_displaced_vertex_has_that_z0_on_every_edge() -> None:
    vertex_mm, cot_theta = 87.0, 0.6
    pos = torch.stack([RADII_MM, torch.full_like(RADII_MM, 1.2),
                       vertex_mm + cot_theta * RADII_MM], dim=1)
    trajectory = edge_trajectory(pos, chain(len(RADII_MM)))
    torch.testing.assert_close(trajectory[:, 0], torch.full((9,), vertex_mm / 1000,
                                                            dtype=torch.float64))
    assert trajectory[:, 1:].abs().max() < 1e-12     # no turning: phislope = rphislope = 0


def test_a_helix_turns_at_the_rate_of_its_curvature() -> None:
    """A track from the origin with curvature radius R [m] is at phi(r) = phi0 - asin(r / 2R);
    phislope is its chord's dphi / dr, about -1 / (2 R) near the origin."""
    radius_m = 1.0 / (0.3 * 2.0)                     # pT = 1 GeV in a 2 T field
    phi = 0.3 - torch.asin(RADII_MM / 2000.0 / radius_m)
    pos = torch.stack([RADII_MM, phi, 0.4 * RADII_MM], dim=1)
    trajectory = edge_trajectory(pos, chain(len(RADII_MM)))
    dr_m = (RADII_MM[1:] - RADII_MM[:-1]) / 1000
    expected = (phi[1:] - phi[:-1]) / dr_m
    torch.testing.assert_close(trajectory[:, 1], expected)
    torch.testing.assert_close(trajectory[:, 2], (RADII_MM[1:] + RADII_MM[:-1]) / 2000 * expected)
    assert trajectory[0, 1] == pytest.approx(-1 / (2 * radius_m), rel=0.01)
    assert trajectory[:, 0].abs().max() < 1e-12      # z = 0.4 r: through the origin


def test_the_values_do_not_depend_on_the_edge_direction_and_stay_finite_at_equal_radius() -> None:
    pos = torch.tensor([[100.0, 0.1, 300.0], [140.0, 0.12, 380.0], [100.0, 3.1, 900.0],
                        [100.2, -3.1, 920.0]], dtype=torch.float64)
    forward = edge_trajectory(pos, torch.tensor([[0, 2], [1, 3]]))
    backward = edge_trajectory(pos, torch.tensor([[1, 3], [0, 2]]))
    torch.testing.assert_close(forward, backward)
    # hits 2 and 3 are 0.2 mm apart in r across the phi = pi seam: the slope divides by 1 mm
    # (not 0.2 mm) and the wrapped dphi (~0.083 rad, not -6.2), then clips
    assert torch.isfinite(forward).all()
    assert forward[1, 1] == pytest.approx(SLOPE_CLIP)
    assert forward[1, 0] == pytest.approx(-Z0_CLIP)   # z0 = 910 - 100.1 * 20 / 1 mm, clipped


def test_a_model_takes_the_first_five_eight_ten_or_all_twelve_edge_inputs() -> None:
    pos = torch.stack([RADII_MM, torch.zeros_like(RADII_MM), RADII_MM], dim=1).float()
    record = Record(pos=pos, edge_index=chain(len(RADII_MM)), scores=torch.rand(9))
    every = edge_inputs(record)
    assert every.shape == (9, 12)
    torch.testing.assert_close(edge_inputs(record, width=5), every[:, :5])
    torch.testing.assert_close(edge_inputs(record, width=8), every[:, :8])
    torch.testing.assert_close(edge_inputs(record, width=10), every[:, :10])
    torch.testing.assert_close(every[:, 4], record.scores)
    old = InteractionGNN(3, hidden=4, n_graph_iters=1, edge_features=5)
    new = InteractionGNN(3, hidden=4, n_graph_iters=1, edge_features=8)
    assert model_edge_inputs(old, record).shape == (9, 5)
    assert model_edge_inputs(new, record).shape == (9, 8)
    with pytest.raises(ValueError, match="edge inputs"):
        model_edge_inputs(InteractionGNN(3, hidden=4, n_graph_iters=1, edge_features=6), record)
    with pytest.raises(ValueError, match=r"edge_features must be 0 or one of \[5, 8, 10, 12\]"):
        edge_inputs(record, width=7)
    assert math.isfinite(float(every.abs().max()))


def test_the_filter_with_trajectory_reads_the_same_columns_after_its_geometry() -> None:
    from trkx.filter.features import edge_features
    from trkx.filter.model import FilterMLP

    pos = torch.stack([RADII_MM, 0.01 * torch.arange(10.0, dtype=torch.float64),
                       3.0 + 0.5 * RADII_MM], dim=1).float()
    x = pos / torch.tensor([1000.0, math.pi, 1000.0])
    edges = chain(len(RADII_MM))
    plain = edge_features(x, pos, edges)
    extended = edge_features(x, pos, edges, trajectory=True)
    torch.testing.assert_close(extended[:, :plain.shape[1]], plain)
    torch.testing.assert_close(extended[:, plain.shape[1]:], edge_trajectory(pos, edges))
    assert FilterMLP(3, trajectory=True).in_features == FilterMLP(3).in_features + 3
    with pytest.raises(ValueError, match="edge features"):
        FilterMLP(3, trajectory=True)(plain)
