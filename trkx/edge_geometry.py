"""The geometry of a candidate edge: what the filter's edge features and the GNN's edge inputs
both know about an edge before any network sees it.

For an edge i -> j between hits with cylindrical positions (r, phi, z) [mm, rad, mm] and
pseudorapidity eta = asinh(z / r):

    dr   = (r_j - r_i) / 1000            (metres: trkx.data.features.FEATURE_SCALES["r"])
    dphi = wrap(phi_j - phi_i) / pi      (wrap: the angle mapped into [-pi, pi))
    dz   = (z_j - z_i) / 1000            (metres: FEATURE_SCALES["z"])
    deta = eta_j - eta_i

The edges of a high-momentum track from the origin have deta near 0 and a small dphi.
"""

from __future__ import annotations

import math

import torch

from trkx.data.features import FEATURE_SCALES

#: Columns of :func:`edge_geometry`: dr, dphi, dz, deta.
GEOMETRY_FEATURES = 4


def wrap_angle(angle: torch.Tensor) -> torch.Tensor:
    """``angle`` mapped into ``[-pi, pi)``."""
    return torch.remainder(angle + math.pi, 2 * math.pi) - math.pi


def edge_geometry(pos: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
    """[E, 4] scaled (dr, dphi, dz, deta) of the edges ``edge_index`` [2, E] between the hits
    at ``pos`` [N, 3] = (r, phi, z) (the module docstring)."""
    src, dst = edge_index
    r, phi, z = pos[:, 0], pos[:, 1], pos[:, 2]
    eta = torch.asinh(z / r.clamp_min(1e-6))
    dphi = wrap_angle(phi[dst] - phi[src])
    return torch.stack([(r[dst] - r[src]) / FEATURE_SCALES["r"], dphi / math.pi,
                        (z[dst] - z[src]) / FEATURE_SCALES["z"], eta[dst] - eta[src]], dim=1)
