"""Edge features of the filter: both hits' features and the edge geometry.

The geometry block (dr, dphi, dz, deta, scaled) is :func:`trkx.edge_geometry.edge_geometry`,
which the GNN's edge inputs share. With cluster-shape features (``dir_eta``, ``dir_phi`` among
the hit feature names) the agreement between the edge's own direction, eta_e = asinh(dz / |dxy|)
and phi_e = atan2(dy, dx), and the direction measured by each hit's cluster is added:

    a_eta(h) = dir_eta(h) - eta_e,   a_phi(h) = wrap(dir_phi(h) - phi_e),   h in {i, j}.

With ``trajectory`` the edge's straight-line trajectory (z0, phislope, rphislope:
:func:`trkx.edge_geometry.edge_trajectory`, the columns the GNN's edge inputs share) closes the row.

Row layout: [x_i, x_j, dr, dphi, dz, deta (, a_eta(i), a_phi(i), a_eta(j), a_phi(j))
(, z0, phislope, rphislope)].

The rows are returned as a [E, F] view of a feature-major [F, E] tensor: each column is
computed and written whole (contiguous), where an [E, F] row-major table would be written with
stride F for every column (``torch.cat(dim=1)`` of 29 narrow columns cost as much as the
filter's first layer, issue 47). The values are the same; the network reads either layout.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from trkx.data.features import FEATURE_SCALES
from trkx.edge_geometry import (
    GEOMETRY_FEATURES,
    TRAJECTORY_FEATURES,
    endpoints,
    geometry_rows,
    trajectory_rows,
    wrap_angle,
)

CELL_AGREEMENT_FEATURES = 4


def has_cell_directions(feature_names: Sequence[str] | None) -> bool:
    return feature_names is not None and {"dir_eta", "dir_phi"} <= set(feature_names)


def edge_feature_count(hit_features: int, cells: bool, trajectory: bool = False) -> int:
    return (2 * hit_features + GEOMETRY_FEATURES + (CELL_AGREEMENT_FEATURES if cells else 0)
            + (TRAJECTORY_FEATURES if trajectory else 0))


def edge_features(x: torch.Tensor, pos: torch.Tensor, edge_index: torch.Tensor,
                  feature_names: Sequence[str] | None = None, hit_features: int | None = None,
                  trajectory: bool = False) -> torch.Tensor:
    """[E, edge_feature_count] float32 features of the edges ``edge_index`` [2, E], as the
    transposed view of a contiguous [F, E] tensor (the module docstring).

    The leading ``hit_features`` columns of ``x`` (all when None) are the hit part; the cell
    agreement is added when ``feature_names`` names the cluster directions, the trajectory
    columns when ``trajectory``.
    """
    src, dst = edge_index
    hits = (x if hit_features is None else x[:, :hit_features]).t().contiguous()   # [H, N]
    ends = endpoints(pos, edge_index)            # both ends' (r, phi, z, eta) rows [4, E]
    rows = [hits.index_select(1, src), hits.index_select(1, dst),
            torch.stack(geometry_rows(ends), dim=0)]
    if has_cell_directions(feature_names):
        names = list(feature_names)
        dir_eta = x[:, names.index("dir_eta")] * FEATURE_SCALES["dir_eta"]
        dir_phi = x[:, names.index("dir_phi")] * FEATURE_SCALES["dir_phi"]
        r, phi = pos[:, 0], pos[:, 1]
        across, up = r * torch.cos(phi), r * torch.sin(phi)      # per hit, gathered per edge
        dx = across[dst] - across[src]
        dy = up[dst] - up[src]
        edge_eta = torch.asinh((ends[1][2] - ends[0][2]) / torch.hypot(dx, dy).clamp_min(1e-6))
        edge_phi = torch.atan2(dy, dx)
        agreement = []
        for hit in (src, dst):
            agreement.append((dir_eta[hit] - edge_eta) / FEATURE_SCALES["dir_eta"])
            agreement.append(wrap_angle(dir_phi[hit] - edge_phi) / math.pi)
        rows.append(torch.stack(agreement, dim=0))
    if trajectory:
        rows.append(torch.stack(trajectory_rows(ends), dim=0))
    return torch.cat(rows, dim=0).float().t()
