"""The agreement edge inputs: an edge's best continuation at each hit, against the definition,
on both paths (the CPU's compiled kernel and the GPU's torch enumeration, forced on the CPU)."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

import trkx.edges.agreement as agreement_module
from trkx.edges.agreement import CLIP, SLOPE_SCALE, Z0_SCALE, both_agreements, edge_agreement
from trkx.edges.geometry import edge_trajectory

RADII_MM = torch.tensor([32.0, 72.0, 116.0, 172.0, 260.0, 360.0])


def track(vertex_mm: float, cot_theta: float, phi0: float, slope: float) -> torch.Tensor:
    """Hits (r, phi, z) of a track from z = vertex_mm turning at ``slope`` rad/m."""
    phi = phi0 + slope * RADII_MM / 1000
    return torch.stack([RADII_MM, phi, vertex_mm + cot_theta * RADII_MM], dim=1)


def definition(pos: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
    """The module docstring, hit by hit and pair by pair."""
    trajectory = edge_trajectory(pos, edge_index).double()
    rz = pos[:, [0, 2]].double()
    edges = edge_index.t().tolist()
    g = torch.ones(len(edges), 2, dtype=torch.float64)
    for e, (i, j) in enumerate(edges):
        for side, (h, a) in enumerate(((i, j), (j, i))):
            e_out = float(torch.dot(rz[a] - rz[h], rz[h])) >= 0
            for f, (k, m) in enumerate(edges):
                if h not in (k, m) or f == e:
                    continue
                b = m if k == h else k
                if (float(torch.dot(rz[b] - rz[h], rz[h])) >= 0) == e_out:
                    continue          # same side of h: an alternative, not a continuation
                d = math.hypot((trajectory[e, 0] - trajectory[f, 0]) / Z0_SCALE,
                               (trajectory[e, 1] - trajectory[f, 1]) / SLOPE_SCALE)
                g[e, side] = min(g[e, side], min(d, CLIP) / CLIP)
    return g


@pytest.mark.usefixtures("agreement_path")
def test_a_tracks_edges_agree_at_every_inner_hit_and_fakes_between_two_tracks_do_not() -> None:
    first = track(vertex_mm=-40.0, cot_theta=0.3, phi0=0.5, slope=0.2)
    second = track(vertex_mm=60.0, cot_theta=0.35, phi0=0.52, slope=-0.1)
    pos = torch.cat([first, second])
    n = len(RADII_MM)
    chain = torch.stack([torch.arange(n - 1), torch.arange(1, n)])
    fakes = torch.tensor([[1, n + 1, 2], [n + 2, 3, n + 3]])        # hits of both tracks
    edge_index = torch.cat([chain, chain + n, fakes], dim=1)
    g = edge_agreement(pos, edge_index)
    true = g[: 2 * (n - 1)].view(2, n - 1, 2)
    assert true[:, 1:, 0].max() < 1e-3 and true[:, :-1, 1].max() < 1e-3   # continued inside
    assert (true[:, 0, 0] == 1).all() and (true[:, -1, 1] == 1).all()     # a track's two ends
    assert g[2 * (n - 1):].min() > 0.5                                     # fakes: no agreement


def random_graph(seed: int, phi_span: float) -> tuple[torch.Tensor, torch.Tensor]:
    """40 hits (r, phi, z) in a wedge of ``phi_span`` and 15% of their ordered pairs as edges."""
    generator = torch.Generator().manual_seed(seed)
    pos = torch.stack([torch.rand(40, generator=generator) * 900 + 30,
                       torch.rand(40, generator=generator) * phi_span,
                       (torch.rand(40, generator=generator) - 0.5) * 1000], dim=1)
    pairs = [(i, j) for i, j in itertools.permutations(range(40), 2)
             if torch.rand(1, generator=generator) < 0.15]
    return pos, torch.tensor(pairs).t()


@pytest.mark.parametrize("chunk_pairs", [1, 5, 4_000_000])
@pytest.mark.usefixtures("agreement_path")
def test_the_agreement_is_its_definition_on_a_random_graph_in_any_chunking(
        chunk_pairs: int) -> None:
    pos, edge_index = random_graph(3, 0.2)
    expected = definition(pos, edge_index)
    assert 0 < float((expected < 1).float().mean()) < 1                  # both kinds present
    torch.testing.assert_close(edge_agreement(pos, edge_index, chunk_pairs=chunk_pairs).double(),
                               expected, atol=1e-5, rtol=1e-5)


@pytest.mark.usefixtures("agreement_path")
def test_reversing_the_edges_swaps_the_two_columns() -> None:
    pos = torch.cat([track(10.0, 0.2, 1.0, 0.3), track(-30.0, 0.25, 1.01, 0.25)])
    edge_index = torch.tensor([[0, 1, 2, 3, 6, 7, 1, 8], [1, 2, 3, 4, 7, 8, 8, 3]])
    forward = edge_agreement(pos, edge_index)
    torch.testing.assert_close(edge_agreement(pos, edge_index.flip(0)), forward.flip(1))


@pytest.mark.usefixtures("agreement_path")
def test_an_empty_graph_has_no_rows_and_a_bad_chunk_is_refused() -> None:
    pos = track(0.0, 0.1, 0.0, 0.0)
    assert edge_agreement(pos, torch.zeros(2, 0, dtype=torch.long)).shape == (0, 2)
    with pytest.raises(ValueError, match="chunk_pairs must be >= 1"):
        edge_agreement(pos, torch.tensor([[0], [1]]), chunk_pairs=0)


def test_the_kernel_gives_the_torch_paths_values(monkeypatch) -> None:
    """Both paths compute in float64 and round g once: on a 300-hit event with 3,000 edges they
    agree to the float32 rounding (the along-track turn is a cross product on one path, the sine
    of an atan2 difference on the other; torch's own kernels may fuse multiply-adds on some
    CPUs, so the bits are not asserted)."""
    pytest.importorskip("numba")
    generator = torch.Generator().manual_seed(4)
    pos = torch.stack([torch.rand(300, generator=generator) * 900 + 30,
                       torch.rand(300, generator=generator) * 0.5,
                       (torch.rand(300, generator=generator) - 0.5) * 1000], dim=1)
    pos[7] = pos[3]                                   # two hits at one place: a zero segment
    edge_index = torch.randint(0, 300, (2, 3000), generator=generator)
    edge_index = edge_index[:, edge_index[0] != edge_index[1]]
    ours = both_agreements(pos, edge_index)
    monkeypatch.setattr(agreement_module, "COMPILED_DEVICES", ())
    theirs = both_agreements(pos, edge_index, chunk_pairs=1000)
    assert ours.dtype == theirs.dtype == torch.float32 and 0.1 < float((ours < 1).float().mean())
    torch.testing.assert_close(ours, theirs, rtol=1e-6, atol=1e-6)
