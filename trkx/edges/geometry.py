"""The geometry of a candidate edge: what the filter's edge features and the GNN's edge inputs
both know about an edge before any network sees it.

For an edge i -> j between hits with cylindrical positions (r, phi, z) [mm, rad, mm] and
pseudorapidity eta = asinh(z / r):

    dr   = (r_j - r_i) / 1000            (metres: trkx.data.features.FEATURE_SCALES["r"])
    dphi = wrap(phi_j - phi_i) / pi      (wrap: the angle mapped into [-pi, pi))
    dz   = (z_j - z_i) / 1000            (metres: FEATURE_SCALES["z"])
    deta = eta_j - eta_i

The edges of a high-momentum track from the origin have deta near 0 and a small dphi.

The trajectory of the edge (:func:`edge_trajectory`, the references' z0, phislope and
rphislope) says where the straight line through both hits meets the beam line, and how fast it
turns, with Dr = r_j - r_i in mm (|Dr| >= 1 mm, keeping its sign) and Dphi = wrap(phi_j - phi_i):

    z0        = (z_m - r_m (z_j - z_i) / Dr) / 1000          metres, clipped to [-1, 1]
    phislope  = Dphi / (Dr / 1000)                           rad per metre, clipped to [-2, 2]
    rphislope = (r_i + r_j) / 2000 * phislope                dimensionless, clipped to [-2, 2]

with the midpoint z_m = (z_i + z_j) / 2, r_m = (r_i + r_j) / 2 (the same line as
z_i - r_i dz/dr, and the same value for j -> i as for i -> j, clip of Dr included). Every edge
of one track from the luminous region shares its z0 (|z0| <~ 0.15 m whatever the vertex, where
deta alone assumes a vertex at z = 0), and its phislope is ~ 1 / (2 R) with the curvature
radius R = pT / (0.3 B): 0.3 rad/m at pT = 1 GeV in the 2 T field, smaller above.
Edges between hits at equal radius (Dr -> 0, endcap disks) have no defined slope; their values
sit at the clips.
"""

from __future__ import annotations

import math

import torch

from trkx.data.features import FEATURE_SCALES

#: Columns of :func:`edge_geometry`: dr, dphi, dz, deta.
GEOMETRY_FEATURES = 4
#: Columns of :func:`edge_trajectory`: z0, phislope, rphislope.
TRAJECTORY_FEATURES = 3
#: |Dr| below this many mm is raised to it (sign kept) before the slopes divide by it.
MIN_RADIAL_STEP_MM = 1.0
Z0_CLIP = 1.0
SLOPE_CLIP = 2.0


def wrap_angle(angle: torch.Tensor) -> torch.Tensor:
    """``angle`` mapped into ``[-pi, pi)``."""
    return torch.remainder(angle + math.pi, 2 * math.pi) - math.pi


def hit_table(pos: torch.Tensor) -> torch.Tensor:
    """[4, N] contiguous rows (r, phi, z, eta) of the hits at ``pos`` [N, 3] = (r, phi, z): what
    the edge functions read of each endpoint, gathered once per edge by :func:`endpoints`.
    Feature-major: a gather of one row is a contiguous read of N values, so the four rows of
    E edges are gathered several times faster than E rows of four values."""
    r, phi, z = pos[:, 0], pos[:, 1], pos[:, 2]
    eta = torch.asinh(z / r.clamp_min(1e-6))
    return torch.stack([r, phi, z, eta], dim=0)


def endpoints(pos: torch.Tensor, edge_index: torch.Tensor,
              table: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """``(T[:, src], T[:, dst])``: [4, E] rows (r, phi, z, eta) of :func:`hit_table` at both
    ends of every edge (one gather per end instead of one per column and use); ``table``
    when already made."""
    table = hit_table(pos) if table is None else table
    src, dst = edge_index
    return table.index_select(1, src), table.index_select(1, dst)


def geometry_rows(ends: tuple[torch.Tensor, torch.Tensor]) -> list[torch.Tensor]:
    """The four [E] vectors (dr, dphi, dz, deta) of :func:`edge_geometry` from
    :func:`endpoints`."""
    a, b = ends
    dphi = wrap_angle(b[1] - a[1])
    return [(b[0] - a[0]) / FEATURE_SCALES["r"], dphi / math.pi,
            (b[2] - a[2]) / FEATURE_SCALES["z"], b[3] - a[3]]


def edge_geometry(pos: torch.Tensor, edge_index: torch.Tensor,
                  ends: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
    """[E, 4] scaled (dr, dphi, dz, deta) of the edges ``edge_index`` [2, E] between the hits
    at ``pos`` [N, 3] = (r, phi, z) (the module docstring); ``ends``: :func:`endpoints` when
    already gathered (the same values)."""
    ends = endpoints(pos, edge_index) if ends is None else ends
    return torch.stack(geometry_rows(ends), dim=1)


def trajectory_rows(ends: tuple[torch.Tensor, torch.Tensor]) -> list[torch.Tensor]:
    """The three [E] vectors (z0, phislope, rphislope) of :func:`edge_trajectory` from the
    endpoints' leading rows (r, phi, z) [>= 3, E]."""
    a, b = ends
    r_src, phi_src, z_src = a[0], a[1], a[2]
    r_dst, phi_dst, z_dst = b[0], b[1], b[2]
    step = r_dst - r_src
    sign = torch.where(step < 0, -torch.ones_like(step), torch.ones_like(step))
    step = sign * step.abs().clamp_min(MIN_RADIAL_STEP_MM)
    z0 = ((z_src + z_dst) / 2 - (r_src + r_dst) / 2 * (z_dst - z_src) / step
          ) / FEATURE_SCALES["z"]
    phislope = wrap_angle(phi_dst - phi_src) / (step / 1000.0)
    rphislope = (r_src + r_dst) / 2000.0 * phislope
    return [z0.clamp(-Z0_CLIP, Z0_CLIP), phislope.clamp(-SLOPE_CLIP, SLOPE_CLIP),
            rphislope.clamp(-SLOPE_CLIP, SLOPE_CLIP)]


def edge_trajectory(pos: torch.Tensor, edge_index: torch.Tensor,
                    ends: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
    """[E, 3] (z0, phislope, rphislope) of the edges ``edge_index`` [2, E] between the hits at
    ``pos`` [N, 3] = (r, phi, z) in mm and rad (the module docstring); ``ends``:
    :func:`endpoints` when already gathered (the same values)."""
    if ends is None:
        src, dst = edge_index
        table = pos.t().contiguous()
        ends = table.index_select(1, src), table.index_select(1, dst)
    return torch.stack(trajectory_rows(ends), dim=1)
