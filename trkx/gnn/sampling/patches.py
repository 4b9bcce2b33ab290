"""Target hits in contiguous (eta, phi) patches: minibatches whose loss covers most of their edges.

A ShaDow minibatch of T random target hits is the union of T small neighbourhoods that barely
overlap: on a pile-up-200 filter graph 64 random targets with 2 hops hold ~66,000 edges, of
which ~1,400 (2%) touch a target and count in the loss. Targets taken together from one region
of the detector share their neighbourhoods: 4,096 hits of one patch with the same 2 hops hold
~84,000 edges, half of them target edges, so a step of about the same cost supervises 30 times
as many edges, and the targets' edges see their whole region, as at inference.

For the hits i with at least one edge, at cylindrical ``(r_i, phi_i, z_i)``,

    eta_i  = asinh(z_i / r_i)                                   pseudorapidity of the hit
    band_i = floor((eta_i + u) / w)                             eta band of width w
    psi_i  = (phi_i + rho) mod 2 pi                             azimuth, rotated

with ``u ~ U[0, w)`` and ``rho ~ U[0, 2 pi)`` drawn once per event and pass (so the patch
borders move from pass to pass and no edge is always on one). The hits of band b, ordered by
psi, are cut into ``ceil(n_b / T)`` runs of equal size (each at most T); every run is one
minibatch's targets, an arc in phi of one eta band. The minibatches of an event are returned in
a random order. Every such hit is a target exactly once per pass, as with random targets.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor


def patch_targets(hits: Tensor, pos: Tensor, targets_per_batch: int, eta_width: float,
                  generator: torch.Generator) -> list[Tensor]:
    """The target sets of one event: ``hits`` (ids of the hits with edges) cut into (eta, phi)
    patches of at most ``targets_per_batch`` (module docstring); ``pos`` is the event's
    ``[N, 3]`` (r, phi, z) rows. Random draws come from ``generator``."""
    if eta_width <= 0:
        raise ValueError(f"patch eta width must be > 0, got {eta_width}")
    if hits.numel() == 0:
        return []
    r, phi, z = (pos[hits, column].double() for column in range(3))
    eta = torch.asinh(z / r.clamp_min(1e-9))
    offset, rotation = torch.rand(2, generator=generator, dtype=torch.float64).unbind()
    band = torch.floor((eta + offset * eta_width) / eta_width).long()
    psi = torch.remainder(phi + rotation * 2 * math.pi, 2 * math.pi)
    band_rank = torch.unique(band, return_inverse=True)[1]     # 0 .. bands-1, eta order
    order = torch.argsort(band_rank.double() * 8.0 + psi, stable=True)  # psi < 2 pi < 8
    counts = torch.bincount(band_rank)
    patches: list[Tensor] = []
    for members in torch.split(hits[order], counts.tolist()):
        pieces = -(-members.numel() // targets_per_batch)
        patches += list(torch.tensor_split(members, pieces))
    shuffle = torch.randperm(len(patches), generator=generator).tolist()
    return [patches[i] for i in shuffle]
