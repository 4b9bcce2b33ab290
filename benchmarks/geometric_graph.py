"""A realistic detector graph without a trained filter: nearby hits on different layers.

Stand-in for a filtered event graph (used by the benchmark until filtered simulated MU=200
graphs exist, and by tests). For hits at ``pos = (r, phi, z)`` on detector layers
``(volume_id, layer_id)``, with ``eta = asinh(z / r)`` and ``rho = sqrt(r^2 + z^2)``:

    candidates(a) = {b : layer(b) != layer(a), rho_b > rho_a,
                     |eta_b - eta_a| < d_eta, |phi_b - phi_a| < d_phi (periodic)}
    edges         = for every a, its ``k`` candidates with the smallest ``rho_b - rho_a``
                    (the next layers outward), directed a -> b (inner -> outer)

so every edge joins nearby hits on adjacent layers, as a track's consecutive hits do.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from scipy.spatial import cKDTree
from torch import Tensor


def layer_neighbour_graph(pos: Tensor, layer: Tensor, k: int = 4, d_eta: float = 0.02,
                          d_phi: float = 0.02) -> Tensor:
    """``edge_index`` [2, E] (int64, inner -> outer) of the graph described above.

    ``layer`` is any integer id per hit that is equal for hits on the same detector layer
    (e.g. ``volume_id * 100 + layer_id``).
    """
    r = pos[:, 0].double().numpy()
    phi = pos[:, 1].double().numpy()
    z = pos[:, 2].double().numpy()
    eta = np.arcsinh(z / np.maximum(r, 1e-9))
    rho = np.hypot(r, z)
    lay = layer.numpy()
    # scaled coordinates: the (d_eta, d_phi) box fits in the unit ball of radius sqrt(2)
    u = (eta - eta.min()) / d_eta
    v = np.mod(phi + math.pi, 2 * math.pi) / d_phi
    period = 2 * math.pi / d_phi
    v = np.minimum(v, np.nextafter(period, 0))
    tree = cKDTree(np.stack([u, v], 1), boxsize=[u.max() + 10.0, period])
    pairs = tree.query_pairs(r=math.sqrt(2.0), output_type="ndarray")
    a, b = pairs[:, 0], pairs[:, 1]
    swap = rho[a] > rho[b]
    inner, outer = np.where(swap, b, a), np.where(swap, a, b)
    dphi = np.abs(np.mod(phi[outer] - phi[inner] + math.pi, 2 * math.pi) - math.pi)
    keep = ((lay[inner] != lay[outer]) & (np.abs(eta[outer] - eta[inner]) < d_eta)
            & (dphi < d_phi) & (rho[outer] > rho[inner]))
    inner, outer = inner[keep], outer[keep]
    step = rho[outer] - rho[inner]
    order = np.lexsort((step, inner))
    inner, outer = inner[order], outer[order]
    first = np.searchsorted(inner, inner, side="left")
    rank_in_group = np.arange(inner.size) - first
    keep = rank_in_group < k
    return torch.from_numpy(np.stack([inner[keep], outer[keep]]).astype(np.int64))
