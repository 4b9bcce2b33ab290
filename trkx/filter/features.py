"""Edge features of the filter: both hits' features and the edge geometry.

The geometry block (dr, dphi, dz, deta, scaled) is :func:`trkx.edges.geometry.edge_geometry`,
which the GNN's edge inputs share. With cluster-shape features (``dir_eta``, ``dir_phi`` among
the hit feature names) the agreement between the edge's own direction, eta_e = asinh(dz / |dxy|)
and phi_e = atan2(dy, dx), and the direction measured by each hit's cluster is added:

    a_eta(h) = dir_eta(h) - eta_e,   a_phi(h) = wrap(dir_phi(h) - phi_e),   h in {i, j}.

With ``trajectory`` the edge's straight-line trajectory (z0, phislope, rphislope:
:func:`trkx.edges.geometry.edge_trajectory`, the columns the GNN's edge inputs share) closes
the row.

Row layout: [x_i, x_j, dr, dphi, dz, deta (, a_eta(i), a_phi(i), a_eta(j), a_phi(j))
(, z0, phislope, rphislope)].

On the CPU a compiled kernel (trkx.filter.feature_kernels) writes each edge's row in one pass
over the edges, in float64 rounded once. Elsewhere (the GPU's path, :func:`torch_rows`) the rows
are torch operations on the float64 hits (the same values, rounded once), returned as a [E, F]
view of a feature-major [F, E] tensor: each column is
computed and written whole (contiguous), where an [E, F] row-major table would be written with
stride F for every column (``torch.cat(dim=1)`` of 29 narrow columns cost as much as the
filter's first layer). The network reads either layout.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from trkx.data.features import FEATURE_SCALES
from trkx.edges.geometry import (
    GEOMETRY_FEATURES,
    MIN_RADIAL_STEP_MM,
    SLOPE_CLIP,
    TRAJECTORY_FEATURES,
    Z0_CLIP,
    endpoints,
    geometry_rows,
    trajectory_rows,
    wrap_angle,
)
from trkx.runtime.device import runs_compiled

CELL_AGREEMENT_FEATURES = 4


def has_cell_directions(feature_names: Sequence[str] | None) -> bool:
    return feature_names is not None and {"dir_eta", "dir_phi"} <= set(feature_names)


def edge_feature_count(hit_features: int, cells: bool, trajectory: bool = False) -> int:
    return (2 * hit_features + GEOMETRY_FEATURES + (CELL_AGREEMENT_FEATURES if cells else 0)
            + (TRAJECTORY_FEATURES if trajectory else 0))


#: Devices whose edge features come from the compiled kernel (trkx.filter.feature_kernels: one
#: pass over the edges, where the torch rows below make a pass per operation); elsewhere (a
#: GPU), or without numba, the torch rows. Tests empty it to run the GPU's rows on the CPU.
COMPILED_DEVICES: tuple[str, ...] = ("cpu",)


def compiled(x: torch.Tensor) -> bool:
    """Whether the edge features of hits on ``x``'s device come from the compiled kernel."""
    return runs_compiled(x, COMPILED_DEVICES)


def hit_table(x: torch.Tensor, pos: torch.Tensor, feature_names: Sequence[str] | None = None,
              hit_features: int | None = None) -> torch.Tensor:
    """The compiled kernel's per-hit rows [N, H + 4 (+ 4)] float64: the leading
    ``hit_features`` columns of ``x``, r, phi, z, eta = asinh(z / r), and with the cluster
    directions in ``feature_names`` x = r cos phi, y = r sin phi, dir_eta, dir_phi (unscaled).
    Made once per event; :func:`edge_features` reads it for every chunk of edges."""
    hits = x if hit_features is None else x[:, :hit_features]
    r, phi, z = (pos[:, c].double() for c in range(3))
    columns = [hits.double(), r[:, None], phi[:, None], z[:, None],
               torch.asinh(z / r.clamp_min(1e-6))[:, None]]
    if has_cell_directions(feature_names):
        names = list(feature_names)
        columns += [(r * torch.cos(phi))[:, None], (r * torch.sin(phi))[:, None],
                    x[:, names.index("dir_eta"), None].double() * FEATURE_SCALES["dir_eta"],
                    x[:, names.index("dir_phi"), None].double() * FEATURE_SCALES["dir_phi"]]
    return torch.cat(columns, dim=1).contiguous()


def edge_features(x: torch.Tensor, pos: torch.Tensor, edge_index: torch.Tensor,
                  feature_names: Sequence[str] | None = None, hit_features: int | None = None,
                  trajectory: bool = False, table: torch.Tensor | None = None,
                  out: torch.Tensor | None = None) -> torch.Tensor:
    """[E, edge_feature_count] float32 features of the edges ``edge_index`` [2, E] (the module
    docstring).

    The leading ``hit_features`` columns of ``x`` (all when None) are the hit part; the cell
    agreement is added when ``feature_names`` names the cluster directions, the trajectory
    columns when ``trajectory``. On the CPU the compiled kernel writes them (into ``out``
    [>= E, F] float32 when given, so chunks of one event reuse one buffer; from ``table``, the
    event's :func:`hit_table`, when given); elsewhere the torch rows (:func:`torch_rows`) of
    the float64 hits, so that both paths round the same float64 values once.
    """
    if not compiled(x):        # in float64, rounded once: the compiled kernel's values
        return torch_rows(x.double(), pos.double(), edge_index, feature_names, hit_features,
                          trajectory)
    from trkx.filter.feature_kernels import fill_edge_features

    h = x.shape[1] if hit_features is None else hit_features
    cells = has_cell_directions(feature_names)
    if table is None:
        table = hit_table(x, pos, feature_names, hit_features)
    count = edge_feature_count(h, cells, trajectory)
    edges = edge_index.shape[1]
    if out is None:
        out = torch.empty(edges, count, device=x.device)
    if out.shape[1] != count or out.shape[0] < edges or out.dtype != torch.float32:
        raise ValueError(f"out must be [>= {edges}, {count}] float32, got "
                         f"{tuple(out.shape)} {out.dtype}")
    rows = out[:edges]
    src, dst = edge_index.long()
    direction = torch.empty(edges if cells else 0, 3, dtype=torch.float64, device="cpu")
    if cells:
        from trkx.filter.feature_kernels import edge_slopes

        edge_slopes(table.numpy(), src.numpy(), dst.numpy(), h, direction.numpy())
        torch.asinh(direction[:, 0], out=direction[:, 0])
        direction[:, 1] = torch.atan2(direction[:, 1], direction[:, 2])
    fill_edge_features(table.numpy(), src.numpy(), dst.numpy(), h, cells, trajectory,
                       FEATURE_SCALES["r"], FEATURE_SCALES["z"], FEATURE_SCALES["dir_eta"],
                       MIN_RADIAL_STEP_MM, Z0_CLIP, SLOPE_CLIP, direction.numpy(), rows.numpy())
    return rows


def torch_rows(x: torch.Tensor, pos: torch.Tensor, edge_index: torch.Tensor,
               feature_names: Sequence[str] | None = None, hit_features: int | None = None,
               trajectory: bool = False) -> torch.Tensor:
    """:func:`edge_features` as torch operations in the dtype of ``x`` and ``pos``, on any
    device: a row (or a gather) per operation, then one copy of all rows into the [F, E]
    tensor, returned as float32."""
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
