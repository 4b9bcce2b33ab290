"""Realistic test graphs for track building: truth graph plus noise, with GNN-like scores.

``replicate_event`` overlays ``copies`` phi-rotated copies of a real event record (particle and
hit ids made unique, weights renormalised), so the sample event's 5.5k hits become a full-size
~110k-hit event with the real hit density. ``candidate_graph`` builds the edges a graph
constructor would give: the truth graph (minus a fraction ``truth_loss`` it would miss) plus, for
every hit, its ``k`` nearest outer hits in (eta, phi) on other layers. ``gnn_like_scores`` draws
scores the way a good edge classifier scores them:

    truth edges                 s ~ Beta(true_a, 1)        (P(s < 0.5) = 0.5**true_a)
    same-particle, not truth    s ~ Beta(2, 2)
    other edges                 s ~ Beta(1, 30), a fraction ``hard_fake`` Beta(2, 3)
"""

from __future__ import annotations

import numpy as np
import torch
from scipy.spatial import cKDTree
from torch_geometric.data import Data

from trkx.data.truth import layer_key


def replicate_event(record: Data, copies: int, seed: int = 0) -> Data:
    """``copies`` phi-rotated overlays of ``record`` as one event (see module docstring)."""
    rng = np.random.default_rng(seed)
    n = int(record.num_nodes)
    _, pid_code = np.unique(record.particle_id.numpy(), return_inverse=True)
    n_pid = int(pid_code.max()) + 1
    noise = record.particle_id.numpy() == 0
    max_hit = int(record.hit_id.max()) + 1
    fields: dict[str, list] = {k: [] for k in ("x", "pos", "hit_id", "particle_id", "pt", "eta",
                                                "nhits", "weight", "signal_hit", "volume_id",
                                                "layer_id", "track_edges")}
    for c in range(copies):
        pos = record.pos.clone()
        pos[:, 1] = torch.remainder(pos[:, 1] + rng.uniform(0, 2 * np.pi) + np.pi,
                                    2 * np.pi) - np.pi
        fields["pos"].append(pos)
        fields["hit_id"].append(record.hit_id + c * max_hit)
        pid = np.where(noise, 0, pid_code + c * n_pid + 1)
        fields["particle_id"].append(torch.from_numpy(pid.astype(np.int64)))
        for key in ("x", "pt", "eta", "nhits", "signal_hit", "volume_id", "layer_id"):
            fields[key].append(getattr(record, key))
        fields["weight"].append(record.weight / copies)
        fields["track_edges"].append(record.track_edges + c * n)
    out = Data(**{k: torch.cat(v, dim=-1 if k == "track_edges" else 0)
                  for k, v in fields.items()})
    out.num_nodes = n * copies
    out.event_id = torch.tensor(int(record.event_id))
    return out


def candidate_graph(record: Data, k: int = 6, truth_loss: float = 0.02,
                    seed: int = 0) -> np.ndarray:
    """[2, E] candidate edges: most of the truth graph plus k (eta, phi) neighbours per hit."""
    rng = np.random.default_rng(seed)
    pos = record.pos.numpy().astype(np.float64)
    r, phi, z = pos[:, 0], pos[:, 1], pos[:, 2]
    eta = np.arcsinh(z / r)
    layer = layer_key(record.volume_id.numpy(), record.layer_id.numpy())
    # Embed phi on a circle so neighbours wrap around at +-pi.
    points = np.stack([eta * 4.0, np.cos(phi) * 4.0, np.sin(phi) * 4.0], axis=1)
    _, neighbours = cKDTree(points).query(points, k=k + 1)
    src = np.repeat(np.arange(len(r)), k + 1)
    dst = neighbours.reshape(-1)
    keep = (src != dst) & (layer[src] != layer[dst]) & (r[dst] > r[src])
    noise_edges = np.stack([src[keep], dst[keep]])
    truth = record.track_edges.numpy()
    truth = truth[:, rng.random(truth.shape[1]) >= truth_loss]
    # Truth edges keep the particle's direction, the others point outwards in r (as a graph
    # constructor orders them); a neighbour pair that is also a truth edge is dropped.
    n = len(r)
    truth_pairs = np.minimum(truth[0], truth[1]) * n + np.maximum(truth[0], truth[1])
    noise_pairs = np.minimum(noise_edges[0], noise_edges[1]) * n + \
        np.maximum(noise_edges[0], noise_edges[1])
    _, first = np.unique(noise_pairs, return_index=True)
    noise_edges = noise_edges[:, first[~np.isin(noise_pairs[first], truth_pairs)]]
    return np.concatenate([truth, noise_edges], axis=1)


def gnn_like_scores(record: Data, edges: np.ndarray, true_a: float = 6.0,
                    hard_fake: float = 0.03, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Scores [E] for ``edges`` and their truth label ``y`` (see module docstring)."""
    rng = np.random.default_rng(seed)
    n = int(record.num_nodes)
    truth = record.track_edges.numpy()
    truth_key = np.unique(np.concatenate([truth[0] * n + truth[1], truth[1] * n + truth[0]]))
    y = np.isin(edges[0] * n + edges[1], truth_key)
    pid = record.particle_id.numpy()
    same = (pid[edges[0]] == pid[edges[1]]) & (pid[edges[0]] != 0) & ~y
    fake = ~y & ~same
    score = np.empty(edges.shape[1])
    score[y] = rng.beta(true_a, 1.0, int(y.sum()))
    score[same] = rng.beta(2.0, 2.0, int(same.sum()))
    hard = fake & (rng.random(len(score)) < hard_fake)
    easy = fake & ~hard
    score[hard] = rng.beta(2.0, 3.0, int(hard.sum()))
    score[easy] = rng.beta(1.0, 30.0, int(easy.sum()))
    return score.astype(np.float32), y
