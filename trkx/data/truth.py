"""Per-hit truth, the truth graph and the signal definition.

Truth graph. For particle ``p`` take its hits ordered by distance from its production vertex,
``d_i = |t_i - v_p|``, and group consecutive hits that lie on the same (volume, layer): such a
group is an overlap double hit (two modules of one layer) and must not be chained into a
same-layer zig-zag. Every hit of group ``g`` is joined to every hit of group ``g + 1``:

    track_edges = { (i, j) : i in G_g(p), j in G_{g+1}(p) },   directed from the vertex outwards.

A particle whose hits all lie on a single layer (a grazing track through overlapping modules)
has its hits chained in distance order instead, so every particle is one connected component.

Signal. A particle is signal when ``pT >= pt_min`` and it has ``>= min_hits`` hits (and
``|eta| <= max_eta`` when given); noise (particle_id 0) never is.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

#: Largest production radius (mm) of a prompt particle: beyond it a particle is a secondary
#: (K0s and Lambda decays in flight, conversions, interactions in the material).
PROMPT_RADIUS = 1.0


@dataclass(frozen=True)
class SignalCuts:
    """What makes a particle "signal" for efficiencies and weighted losses."""

    pt_min: float = 1.0          # GeV
    min_hits: int = 3
    max_eta: float | None = None

    def select(self, pt: np.ndarray, n_hits: np.ndarray, eta: np.ndarray,
               particle_id: np.ndarray) -> np.ndarray:
        """Boolean mask over particles (or hits) passing the cuts."""
        mask = (np.asarray(pt) >= self.pt_min) & (np.asarray(n_hits) >= self.min_hits)
        mask &= np.asarray(particle_id) != 0
        if self.max_eta is not None:
            mask &= np.abs(np.asarray(eta)) <= self.max_eta
        return mask


def layer_key(volume_id: np.ndarray, layer_id: np.ndarray) -> np.ndarray:
    """One integer per detector layer: ``volume_id * 1000 + layer_id`` (TrackML layer ids are
    even numbers below 1000, so the key is unique)."""
    return np.asarray(volume_id, np.int64) * 1000 + np.asarray(layer_id, np.int64)


def pseudorapidity(px: np.ndarray, py: np.ndarray, pz: np.ndarray) -> np.ndarray:
    """eta = asinh(pz / pT) (finite for pT > 0)."""
    pt = np.hypot(px, py)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.arcsinh(np.where(pt > 0, pz / np.where(pt > 0, pt, 1.0), np.sign(pz) * 1e3))


def hit_truth(hits: pd.DataFrame, truth: pd.DataFrame, particles: pd.DataFrame,
              ) -> pd.DataFrame:
    """Truth per hit, aligned with ``hits`` rows.

    Columns: ``particle_id``, ``pt``, ``eta`` (of the particle at its vertex), ``nhits``
    (hits of the particle in this event), ``weight``, ``tx, ty, tz`` and the particle vertex
    ``vx, vy, vz``. Noise hits get particle_id 0, pt/eta 0, nhits 0.
    """
    by_hit = truth.set_index("hit_id").reindex(hits["hit_id"].to_numpy())
    particle_id = by_hit["particle_id"].fillna(0).to_numpy(np.int64)
    table = particles.set_index("particle_id")
    index = table.index.get_indexer(particle_id)
    known = (index >= 0) & (particle_id != 0)
    take = lambda name: np.where(
        known, table[name].to_numpy(np.float64)[index], 0.0)
    px, py, pz = take("px"), take("py"), take("pz")
    counts = pd.Series(particle_id).map(pd.Series(particle_id).value_counts()).to_numpy()
    return pd.DataFrame({
        "particle_id": particle_id,
        "pt": np.hypot(px, py),
        "eta": np.where(known, pseudorapidity(px, py, pz), 0.0),
        "nhits": np.where(particle_id != 0, counts, 0),
        "weight": by_hit["weight"].fillna(0).to_numpy(np.float64),
        "tx": by_hit["tx"].to_numpy(np.float64),
        "ty": by_hit["ty"].to_numpy(np.float64),
        "tz": by_hit["tz"].to_numpy(np.float64),
        "vx": take("vx"), "vy": take("vy"), "vz": take("vz"),
    })


def truth_graph(particle_id: np.ndarray, vertex_distance: np.ndarray, volume_id: np.ndarray,
                layer_id: np.ndarray) -> np.ndarray:
    """The truth graph as a [2, T] int64 array of hit indices (see the module docstring).

    All inputs are per hit; noise hits (particle_id 0) get no edges.
    """
    particle_id = np.asarray(particle_id, dtype=np.int64)
    real = np.flatnonzero(particle_id != 0)
    if len(real) == 0:
        return np.zeros((2, 0), dtype=np.int64)
    order = real[np.lexsort((vertex_distance[real], particle_id[real]))]
    pid = particle_id[order]
    layers = layer_key(np.asarray(volume_id)[order], np.asarray(layer_id)[order])
    new_group = np.ones(len(order), dtype=bool)
    new_group[1:] = (pid[1:] != pid[:-1]) | (layers[1:] != layers[:-1])
    group = np.cumsum(new_group) - 1                    # group index per sorted hit
    starts = np.flatnonzero(new_group)                  # first sorted position of each group
    sizes = np.diff(np.append(starts, len(order)))
    group_pid = pid[starts]
    # A hit links to every hit of the next group when that group belongs to the same particle.
    has_next = np.append(group_pid[1:] == group_pid[:-1], False)
    source_pos = np.flatnonzero(has_next[group])
    next_group = group[source_pos] + 1
    repeat = sizes[next_group]
    sources = np.repeat(source_pos, repeat)
    offsets = np.arange(repeat.sum()) - np.repeat(np.cumsum(repeat) - repeat, repeat)
    targets = np.repeat(starts[next_group], repeat) + offsets
    # A particle whose hits all lie on one layer (one group) has no next layer: chain its hits
    # in vertex-distance order so that it still forms one connected track.
    has_prev = np.append(False, group_pid[1:] == group_pid[:-1])
    lonely = np.flatnonzero(~has_next & ~has_prev & (sizes > 1))
    chain = np.concatenate([np.arange(starts[g], starts[g] + sizes[g] - 1) for g in lonely]
                           ) if lonely.size else np.zeros(0, dtype=np.int64)
    sources = np.concatenate([sources, chain]).astype(np.int64)
    targets = np.concatenate([targets, chain + 1]).astype(np.int64)
    return np.stack([order[sources], order[targets]]).astype(np.int64)


def vertex_distance(truth_per_hit: pd.DataFrame) -> np.ndarray:
    """|t - v| per hit, from the columns of :func:`hit_truth`."""
    return np.sqrt((truth_per_hit["tx"] - truth_per_hit["vx"]) ** 2
                   + (truth_per_hit["ty"] - truth_per_hit["vy"]) ** 2
                   + (truth_per_hit["tz"] - truth_per_hit["vz"]) ** 2).to_numpy()


def signal_hits(truth_per_hit: pd.DataFrame, cuts: SignalCuts | None = None) -> np.ndarray:
    """Per-hit mask: the hit belongs to a signal particle."""
    cuts = cuts or SignalCuts()
    return cuts.select(truth_per_hit["pt"].to_numpy(), truth_per_hit["nhits"].to_numpy(),
                       truth_per_hit["eta"].to_numpy(), truth_per_hit["particle_id"].to_numpy())


def edge_truth(edge_index: np.ndarray, particle_id: np.ndarray, track_edges: np.ndarray,
               signal_hit: np.ndarray, n_hits: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Labels of candidate edges ``edge_index`` [2, E].

    Returns ``y`` (the edge, in either direction, is a truth-graph edge), ``y_pid`` (both ends
    belong to the same non-noise particle) and ``signal`` (``y`` and the particle is signal).
    """
    src, dst = np.asarray(edge_index[0], np.int64), np.asarray(edge_index[1], np.int64)
    truth_keys = np.concatenate([track_edges[0] * n_hits + track_edges[1],
                                 track_edges[1] * n_hits + track_edges[0]])
    truth_keys.sort()
    keys = src * n_hits + dst
    pos = np.clip(np.searchsorted(truth_keys, keys), 0, max(len(truth_keys) - 1, 0))
    y = (truth_keys[pos] == keys) if len(truth_keys) else np.zeros(len(keys), bool)
    y_pid = (particle_id[src] == particle_id[dst]) & (particle_id[src] != 0)
    signal = y & signal_hit[src] & signal_hit[dst]
    return y, y_pid, signal
