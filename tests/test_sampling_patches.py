"""Targets in (eta, phi) patches (trkx.gnn.sampling.patches): every connected hit a target once
per pass, each minibatch one arc of one eta band, and most of a minibatch's edges in its loss."""

from __future__ import annotations

import math

import pytest
import torch

from trkx.data.record_type import Record
from trkx.gnn.sampling.datamodule import SampledMinibatches, SamplingConfig
from trkx.gnn.sampling.patches import patch_targets

pytestmark = pytest.mark.usefixtures("one_thread")


def detector_event(seed: int, particles: int = 1500, layers: int = 8,
                   window: float = 0.08) -> Record:
    """Straight particles from the origin through ``layers`` barrel radii, each hit joined to
    every hit of the next layer within ``window`` in eta and phi (true edges: same particle)."""
    g = torch.Generator().manual_seed(seed)
    eta = torch.rand(particles, generator=g, dtype=torch.float64) * 5 - 2.5
    phi0 = torch.rand(particles, generator=g, dtype=torch.float64) * 2 * math.pi
    radii = torch.linspace(30, 1000, layers, dtype=torch.float64)
    r = radii.repeat(particles)
    pid = torch.arange(particles).repeat_interleave(layers)
    layer = torch.arange(layers).repeat(particles)
    phi = torch.remainder(phi0[pid] + 1e-4 * r, 2 * math.pi) - math.pi
    pos = torch.stack([r, phi, r * torch.sinh(eta[pid])], 1).float()
    src, dst = [], []
    for inner in range(layers - 1):
        a = torch.nonzero(layer == inner).flatten()
        b = torch.nonzero(layer == inner + 1).flatten()
        deta = (eta[pid[a]][:, None] - eta[pid[b]][None, :]).abs()
        dphi = torch.remainder(phi[a][:, None] - phi[b][None, :] + math.pi, 2 * math.pi) - math.pi
        i, j = torch.nonzero((deta < window) & (dphi.abs() < window), as_tuple=True)
        src.append(a[i])
        dst.append(b[j])
    edge_index = torch.stack([torch.cat(src), torch.cat(dst)])
    y = pid[edge_index[0]] == pid[edge_index[1]]
    data = Record(x=pos.clone(), pos=pos, edge_index=edge_index, y=y, signal=y)
    data.num_nodes = pos.shape[0]
    return data


def eta_of(pos: torch.Tensor) -> torch.Tensor:
    return torch.asinh(pos[:, 2].double() / pos[:, 0].double())


def test_patches_cover_each_hit_once_within_one_band_and_one_arc() -> None:
    event = detector_event(0)
    hits = torch.arange(0, event.num_nodes, 2)          # the hits with edges, say
    width, size = 0.5, 100
    patches = patch_targets(hits, event.pos, size, width, torch.Generator().manual_seed(3))
    assert sorted(torch.cat(patches).tolist()) == hits.tolist()
    assert max(p.numel() for p in patches) <= size
    eta = eta_of(event.pos)
    assert all(float(eta[p].max() - eta[p].min()) < width for p in patches)
    # in one band the patches are arcs: a patch's phi range holds no hit of another patch of
    # the band (the rotated azimuth wraps once; compare on the circle via the other patches)
    phi = event.pos[:, 1].double()
    spreads = []
    for p in patches:
        angles = torch.sort(torch.remainder(phi[p], 2 * math.pi)).values
        gaps = torch.diff(torch.cat([angles, angles[:1] + 2 * math.pi]))
        spreads.append(float(2 * math.pi - gaps.max()))        # the arc that holds the patch
    # eta -2.5 .. 2.5 in bands of 0.5: at most 11 bands, whose arcs tile the circle once each
    # (random targets: every patch spreads over nearly the whole circle, 66 circles in all)
    assert len(patches) > 50
    assert sum(spreads) < 11 * 2 * math.pi
    again = patch_targets(hits, event.pos, size, width, torch.Generator().manual_seed(3))
    assert [p.tolist() for p in again] == [p.tolist() for p in patches]   # seeded
    other = patch_targets(hits, event.pos, size, width, torch.Generator().manual_seed(4))
    assert [p.tolist() for p in other] != [p.tolist() for p in patches]   # borders move


def test_patch_minibatches_put_most_edges_in_the_loss() -> None:
    """Same targets per minibatch and hops: random targets leave ~a fifth of a minibatch's
    edges in its loss, patches most of them; every connected hit is a target once per pass."""
    event = detector_event(1)
    share = {}
    for method in ("shadow", "patches"):
        config = SamplingConfig(method=method, targets_per_batch=256, hops=2, bulk=4)
        records = list(SampledMinibatches([event], config, seed=1, rank=0, world_size=1))
        connected = torch.nonzero(torch.bincount(event.edge_index.flatten(),
                                                 minlength=event.num_nodes)).flatten()
        assert sorted(torch.cat([r.target_ids for r in records]).tolist()) == connected.tolist()
        share[method] = (sum(int(r.target_edge_mask.sum()) for r in records)
                         / sum(r.edge_index.shape[1] for r in records))
    assert share["shadow"] < 0.35 and share["patches"] > 0.7, share


def test_patch_config_errors() -> None:
    with pytest.raises(ValueError, match="patch_eta_width must be > 0"):
        SamplingConfig(method="patches", patch_eta_width=0)
    event = detector_event(2, particles=50)
    del event.pos
    loader = SampledMinibatches([event], SamplingConfig(method="patches", hops=1), seed=0,
                                rank=0, world_size=1)
    with pytest.raises(ValueError, match="needs the records' hit positions"):
        next(iter(loader))
