"""The along-track agreement edge inputs (dip and three-hit curvature), against their
definition, and the reason for them: a displaced helix's edges agree along the track where the
beam-line trajectory (z0, phislope) says they do not."""

from __future__ import annotations

import math

import pytest
import torch

from trkx.edges.agreement import (
    CLIP,
    COT_CLIP,
    COT_SCALE,
    CURVATURE_SCALE,
    along_track_agreement,
    both_agreements,
    edge_agreement,
)

from .test_edge_agreement import random_graph


def helix(centre_xy: tuple[float, float], radius: float, start: float, z0: float,
          dz_per_mm: float, arcs: list[float]) -> torch.Tensor:
    """Hits (r, phi, z) on a helix: a circle of ``radius`` mm about ``centre_xy`` in x-y, z
    growing by ``dz_per_mm`` per mm of transverse arc, at the arc lengths ``arcs`` (mm)."""
    rows = []
    for arc in arcs:
        angle = start + arc / radius
        x = centre_xy[0] + radius * math.cos(angle)
        y = centre_xy[1] + radius * math.sin(angle)
        rows.append([math.hypot(x, y), math.atan2(y, x), z0 + dz_per_mm * arc])
    return torch.tensor(rows, dtype=torch.float32)


def definition(pos: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
    """The module docstring's g', continuation by continuation, in float64."""
    r, phi, z = pos.double().unbind(1)
    xyz = torch.stack([r * torch.cos(phi), r * torch.sin(phi), z], dim=1)
    rz = torch.stack([r, z], dim=1)
    edges = edge_index.t().tolist()
    g = torch.ones(len(edges), 2, dtype=torch.float64)

    def outward(h: int, a: int) -> bool:
        return float(torch.dot(rz[a] - rz[h], rz[h])) >= 0

    for e, (i, j) in enumerate(edges):
        for side, (h, a) in enumerate(((i, j), (j, i))):
            for f, (k, m) in enumerate(edges):
                if h not in (k, m) or f == e:
                    continue
                b = m if k == h else k
                if outward(h, b) == outward(h, a):
                    continue
                inner_hit, outer_hit = (a, b) if outward(h, b) else (b, a)
                v_in, v_out = xyz[h] - xyz[inner_hit], xyz[outer_hit] - xyz[h]
                dips = [float(v[2] / max(math.hypot(v[0], v[1]), 1e-3)) for v in (v_in, v_out)]
                dips = [min(max(d, -COT_CLIP), COT_CLIP) for d in dips]
                turn = math.atan2(float(v_out[1]), float(v_out[0])) - \
                    math.atan2(float(v_in[1]), float(v_in[0]))
                turn = (turn + math.pi) % (2 * math.pi) - math.pi
                chord = max(math.hypot(float(v_in[0] + v_out[0]), float(v_in[1] + v_out[1])),
                            1e-3)
                kappa = 2 * math.sin(turn) / chord
                d = math.hypot((dips[0] - dips[1]) / COT_SCALE, kappa / CURVATURE_SCALE)
                g[e, side] = min(g[e, side], min(d, CLIP) / CLIP)
    return g


def test_a_displaced_helix_agrees_along_the_track_not_from_the_beam_line() -> None:
    """A 2 GeV secondary made 80 mm from the axis (radius 3.3 m, pointing away from it): along
    the track its edges agree at every inner hit up to its curvature (the only term left:
    the dip does not change); its z0 and phislope differ from edge to edge."""
    arcs = [0.0, 40.0, 90.0, 150.0, 230.0, 330.0]
    start = math.radians(-60.0)
    radius = 3333.0
    vertex = (80.0, 0.0)
    centre = (vertex[0] - radius * math.cos(start), vertex[1] - radius * math.sin(start))
    pos = helix(centre, radius, start, 30.0, 0.8, arcs)
    n = len(arcs)
    edge_index = torch.stack([torch.arange(n - 1), torch.arange(1, n)])
    along = along_track_agreement(pos, edge_index)
    curvature = 1 / radius / CURVATURE_SCALE / CLIP                      # 0.15
    torch.testing.assert_close(along[1:, 0], torch.full((n - 2,), curvature), atol=2e-3,
                               rtol=0)                                   # continued inside
    torch.testing.assert_close(along[:-1, 1], along[1:, 0])
    assert along[0, 0] == 1 and along[-1, 1] == 1                        # the ends
    prompt_built = edge_agreement(pos, edge_index)
    assert prompt_built[1:, 0].max() == 1.0                  # "no continuation" at some hits
    assert prompt_built[1:, 0].mean() > 3 * along[1:, 0].mean()


def test_a_kink_or_a_dip_change_breaks_the_agreement() -> None:
    arcs = [0.0, 50.0, 100.0]
    straight = helix((-1e6, 0.0), 1e6 + 40.0, 0.0, 0.0, 0.5, arcs)      # a stiff track
    kinked = straight.clone()
    kinked[2, 1] += 0.05                                    # the third hit 5 mm sideways
    dipped = straight.clone()
    dipped[2, 2] += 5.0                                     # 5 mm higher in z
    edge_index = torch.tensor([[0, 1], [1, 2]])
    assert along_track_agreement(straight, edge_index)[0, 1] < 0.01
    assert along_track_agreement(kinked, edge_index)[0, 1] > 0.9
    assert along_track_agreement(dipped, edge_index)[0, 1] > 0.5


@pytest.mark.parametrize("chunk_pairs", [1, 7, 4_000_000])
@pytest.mark.usefixtures("agreement_path")
def test_the_along_track_agreement_is_its_definition_in_any_chunking(chunk_pairs: int) -> None:
    pos, edge_index = random_graph(11, 0.3)
    expected = definition(pos, edge_index)
    assert 0 < float((expected < 1).float().mean()) < 1                  # both kinds present
    torch.testing.assert_close(
        along_track_agreement(pos, edge_index, chunk_pairs=chunk_pairs).double(), expected,
        atol=2e-4, rtol=1e-4)
    torch.testing.assert_close(along_track_agreement(pos, edge_index.flip(0)),
                               along_track_agreement(pos, edge_index).flip(1))


@pytest.mark.usefixtures("agreement_path")
def test_both_agreements_in_one_pass_are_each_agreement() -> None:
    pos, edge_index = random_graph(5, 0.25)
    both = both_agreements(pos, edge_index, chunk_pairs=9)
    assert torch.equal(both[:, :2], edge_agreement(pos, edge_index))
    assert torch.equal(both[:, 2:], along_track_agreement(pos, edge_index))
