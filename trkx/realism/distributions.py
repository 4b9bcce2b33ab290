"""Distributions of one TrackML event that a simulated event should share with a real one, and
their distance (benchmarks/sim_vs_real.py compares them; the simulator is fitted on them).

An :class:`EventView` is an event as far as its truth goes: all its hits (hit counts per layer
and cluster shapes need no truth), and the hits that carry truth (``truth_hit``: every hit of
a fully known event; the pixel hits with recovered truth of event 21001, its pixel projection)
with their particle and the particle table. From a view :func:`event_samples` takes:

* ``layer_hits``: the (volume, layer) key ``1000 volume + layer`` of every hit;
* ``noise_share``: 1 for a noise hit, 0 for a particle's, over the truth hits;
* ``hits_per_particle``: truth hits of each particle that has one;
* ``hits_per_layer_crossed``: hits of a particle on one layer, per (particle, layer) pair
  (2 or more: overlapping modules);
* ``displaced_share``: 1 for a particle hit whose particle was made at ``r_v > 1 mm``, else 0;
* ``log_pt`` (``log10 pT / GeV``) and ``eta`` of the particles with truth hits,
  ``displaced_log_r`` (``log10 r_v / mm``) of those made at ``r_v > 1 mm``, and ``vertex_z``:
  the z of each primary vertex (the bits of the particle id, :mod:`trkx.data.particle_id`)
  with a prompt (``r_v <= 1 mm``) such particle;
* ``edge_{dr,dphi,dz,deta}`` and ``signal_edge_*``: the geometry features
  (:func:`trkx.edges.geometry.edge_geometry`: ``dr, dz`` in m, ``dphi / pi``, ``deta``) of
  the truth-graph edges (:func:`trkx.data.truth.truth_graph`, consecutive hits of a particle
  ordered by distance from its vertex) on the truth hits, all and those of signal particles
  (``pT >= 1 GeV``, ``>= 3`` truth hits);
* ``cells_per_cluster/vol{V}`` and (pixel volumes 7, 8, 9; strip cells all have value 1, so
  there the charge is the cell count) ``charge/vol{V}``: cells and summed cell value of every
  hit of volume ``V``.

Distance of two samples ``a``, ``b`` over the fixed bins ``B`` of a distribution (values outside
the range go to the first or last bin; categories for ``layer_hits``):

    TVD = 1/2 sum_k |p_a(k) - p_b(k)|,  p(k) = n(k) / sum_j n(j),   0 <= TVD <= 1,

which for a 0/1 share is ``|share_a - share_b|``.

Cluster shapes per volume (:func:`shape_samples`, the hit features of
:func:`trkx.data.features.cell_features` that the models may take): ``cell_count``,
``extent_u`` and ``extent_v`` in cells (``extent / pitch``: one pitch per volume, so the same
distance as in mm), ``dir_alpha``, ``dir_beta`` (functions of the two extents within a volume),
``dir_eta`` and ``dir_phi``, each on the fixed bins of :data:`SHAPE_BINS`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from trkx.data.detector import PIXEL_VOLUMES, Detector
from trkx.data.features import cell_features, cylindrical
from trkx.data.particle_id import decode_particle_id
from trkx.data.truth import SignalCuts, layer_key, pseudorapidity, truth_graph
from trkx.edges.geometry import edge_geometry

VOLUMES = (7, 8, 9, 12, 13, 14, 16, 17, 18)
PROMPT_RADIUS = 1.0   # mm: a particle made farther from the beam line is displaced
EDGE_FEATURES = ("dr", "dphi", "dz", "deta")


def _integer_bins(top: int) -> np.ndarray:
    """Edges of the bins 1, 2, ..., top (top takes everything above)."""
    return np.arange(0.5, top + 1.0)


#: Fixed bin edges of every distribution (None: categories, the values themselves).
BINS: dict[str, np.ndarray | None] = {
    "layer_hits": None,
    "noise_share": np.array([-0.5, 0.5, 1.5]),
    "hits_per_particle": _integer_bins(20),
    "hits_per_layer_crossed": _integer_bins(4),
    "displaced_share": np.array([-0.5, 0.5, 1.5]),
    "displaced_log_r": np.linspace(0.0, 3.0, 31),
    "vertex_z": np.linspace(-200.0, 200.0, 21),
    "log_pt": np.linspace(-1.0, 1.5, 51),
    "eta": np.linspace(-4.5, 4.5, 73),
    "edge_dr": np.linspace(-0.01, 0.08, 91),
    "edge_dphi": np.linspace(-0.06, 0.06, 97),
    "edge_dz": np.linspace(-0.4, 0.4, 81),
    "edge_deta": np.linspace(-0.5, 0.5, 101),
}
for _feature in EDGE_FEATURES:
    BINS[f"signal_edge_{_feature}"] = BINS[f"edge_{_feature}"]
for _volume in VOLUMES:
    BINS[f"cells_per_cluster/vol{_volume}"] = _integer_bins(20)
for _volume in PIXEL_VOLUMES:
    BINS[f"charge/vol{_volume}"] = np.linspace(0.0, 3.0, 121)


SHAPE_FEATURES = ("extent_u", "extent_v", "dir_alpha", "dir_beta", "dir_eta", "dir_phi",
                  "cell_count")
#: Fixed bins of the cluster-shape features (extents in cells, angles in rad).
SHAPE_BINS: dict[str, np.ndarray] = {
    "extent_u": _integer_bins(20),
    "extent_v": _integer_bins(20),
    "dir_alpha": np.linspace(0.0, np.pi / 2, 91),
    "dir_beta": np.linspace(0.0, np.pi / 2, 91),
    "dir_eta": np.linspace(-4.5, 4.5, 91),
    "dir_phi": np.linspace(-np.pi, np.pi, 73),
    "cell_count": _integer_bins(20),
}


@dataclass(frozen=True)
class EventView:
    """One event for the comparison (see the module docstring).

    ``hits``: hit_id, x, y, z, volume_id, layer_id; ``cells``: hit_id, value (or None);
    ``truth_hit`` [N] bool: the hit carries truth; ``particle_id`` [N] (0: noise, meaningful
    on truth hits); ``particles``: particle_id, vx, vy, vz, px, py, pz.
    """

    hits: pd.DataFrame
    cells: pd.DataFrame | None
    truth_hit: np.ndarray
    particle_id: np.ndarray
    particles: pd.DataFrame


def event_view(hits: pd.DataFrame, cells: pd.DataFrame | None, particles: pd.DataFrame,
               truth: pd.DataFrame, volumes: tuple[int, ...] | None = None) -> EventView:
    """The view of an event whose ``truth`` (hit_id, particle_id) covers some of its hits:
    those hits (inside ``volumes`` when given) are its truth hits."""
    pid_of = truth.set_index("hit_id")["particle_id"]
    pid = pid_of.reindex(hits["hit_id"].to_numpy())
    truth_hit = pid.notna().to_numpy().copy()
    if volumes is not None:
        truth_hit &= np.isin(hits["volume_id"].to_numpy(), volumes)
    return EventView(hits.reset_index(drop=True), cells, truth_hit,
                     pid.fillna(0).to_numpy(np.int64), particles)


def subsample(view: EventView, n_particles: int, noise_share: float,
              rng: np.random.Generator) -> EventView:
    """The view cut down like the real sample event: ``n_particles`` particles drawn at random
    from the table with all their hits, and noise hits drawn at random so that they make
    ``noise_share`` of the kept hits (``n_noise = round(s / (1 - s) * n_particle_hits)``)."""
    table = view.particles
    keep_pid = rng.choice(table["particle_id"].to_numpy(), size=min(n_particles, len(table)),
                          replace=False)
    particle_rows = np.flatnonzero(view.truth_hit & np.isin(view.particle_id, keep_pid)
                                   & (view.particle_id != 0))
    noise_rows = np.flatnonzero(view.truth_hit & (view.particle_id == 0))
    n_noise = min(noise_rows.size, round(noise_share / (1.0 - noise_share)
                                         * particle_rows.size))
    rows = np.sort(np.concatenate([particle_rows,
                                   rng.choice(noise_rows, size=n_noise, replace=False)]))
    hits = view.hits.iloc[rows].reset_index(drop=True)
    cells = (None if view.cells is None else
             view.cells[view.cells["hit_id"].isin(hits["hit_id"])].reset_index(drop=True))
    particles = table[table["particle_id"].isin(keep_pid)].reset_index(drop=True)
    return EventView(hits, cells, view.truth_hit[rows], view.particle_id[rows], particles)


def _particle_columns(view: EventView, pid: np.ndarray) -> dict[str, np.ndarray]:
    """vx, vy, vz, px, py, pz of particles ``pid`` (NaN for ids missing from the table)."""
    table = view.particles.set_index("particle_id")
    index = table.index.get_indexer(pid)
    known = index >= 0
    return {name: np.where(known, table[name].to_numpy(np.float64)[np.maximum(index, 0)],
                           np.nan) for name in ("vx", "vy", "vz", "px", "py", "pz")}


def truth_edges(view: EventView) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Truth-graph edges [2, T] among the truth hits (indices into ``view.hits``), whether
    each is an edge of a signal particle, and the (r, phi, z) of every hit [N, 3] (float32,
    as in the event record). The hit's measured position stands in for the true crossing in
    the vertex-distance order (event 21001 has no true positions)."""
    hits = view.hits
    r, phi, z, _ = cylindrical(hits["x"], hits["y"], hits["z"])
    pos = np.stack([r, phi, z], axis=1).astype(np.float32)
    rows = np.flatnonzero(view.truth_hit)
    pid = view.particle_id[rows]
    cols = _particle_columns(view, pid)
    position = hits[["x", "y", "z"]].to_numpy(np.float64)[rows]
    vertex = np.stack([cols["vx"], cols["vy"], cols["vz"]], axis=1)
    distance = np.linalg.norm(position - np.nan_to_num(vertex), axis=1)
    edges = truth_graph(pid, distance, hits["volume_id"].to_numpy()[rows],
                        hits["layer_id"].to_numpy()[rows])
    counts = pd.Series(pid).map(pd.Series(pid).value_counts()).to_numpy()
    pt = np.hypot(cols["px"], cols["py"])
    eta = pseudorapidity(np.nan_to_num(cols["px"]), np.nan_to_num(cols["py"]),
                         np.nan_to_num(cols["pz"]))
    signal_hit = SignalCuts().select(np.nan_to_num(pt), counts, eta, pid)
    signal = signal_hit[edges[0]] & signal_hit[edges[1]]
    return rows[edges], signal, pos


def cluster_samples(view: EventView) -> dict[str, np.ndarray]:
    """Cells per cluster and charge (summed cell value) of every hit with cells, per volume."""
    if view.cells is None:
        return {}
    stats = (view.cells.groupby("hit_id")["value"].agg(["size", "sum"])
             .reindex(view.hits["hit_id"].to_numpy()))
    has = stats["size"].notna().to_numpy()
    volume = view.hits["volume_id"].to_numpy()
    out = {}
    for v in VOLUMES:
        mask = has & (volume == v)
        if not mask.any():
            continue
        out[f"cells_per_cluster/vol{v}"] = stats["size"].to_numpy()[mask]
        if v in PIXEL_VOLUMES:
            out[f"charge/vol{v}"] = stats["sum"].to_numpy()[mask]
    return out


def shape_samples(hits: pd.DataFrame, cells: pd.DataFrame, detector: Detector,
                  select: np.ndarray | None = None) -> dict[int, dict[str, np.ndarray]]:
    """The cluster-shape features (:data:`SHAPE_FEATURES`) of the hits with cells (and
    ``select`` [N] when given), per volume: ``{volume: {feature: values}}``."""
    shape = cell_features(hits, cells, detector)
    module = detector.module_index(hits["volume_id"].to_numpy(), hits["layer_id"].to_numpy(),
                                   hits["module_id"].to_numpy())
    shape["extent_u"] = shape["extent_u"] / detector.pitch_u[module]
    shape["extent_v"] = shape["extent_v"] / detector.pitch_v[module]
    keep = shape["cell_count"].to_numpy() > 0
    if select is not None:
        keep &= np.asarray(select, dtype=bool)
    volume = hits["volume_id"].to_numpy()
    return {int(v): {f: shape[f].to_numpy(np.float64)[keep & (volume == v)]
                     for f in SHAPE_FEATURES}
            for v in VOLUMES if (keep & (volume == v)).any()}


def event_samples(view: EventView) -> dict[str, np.ndarray]:
    """The raw values of every distribution of the module docstring for one event."""
    hits = view.hits
    keys = layer_key(hits["volume_id"].to_numpy(), hits["layer_id"].to_numpy())
    pid = view.particle_id[view.truth_hit]
    on_particle = pid != 0
    per_particle = pd.Series(pid[on_particle]).value_counts()
    per_layer = pd.DataFrame({"pid": pid[on_particle],
                              "layer": keys[view.truth_hit][on_particle]}).value_counts()
    particles = per_particle.index.to_numpy()
    cols = _particle_columns(view, particles)
    vertex_r = np.hypot(cols["vx"], cols["vy"])
    hit_cols = _particle_columns(view, pid[on_particle])
    displaced_hit = np.hypot(hit_cols["vx"], hit_cols["vy"]) > PROMPT_RADIUS
    known = np.isfinite(vertex_r)
    prompt = known & (vertex_r <= PROMPT_RADIUS)
    out = {
        "layer_hits": keys,
        "noise_share": (~on_particle).astype(np.float64),
        "hits_per_particle": per_particle.to_numpy(np.float64),
        "hits_per_layer_crossed": per_layer.to_numpy(np.float64),
        "displaced_share": displaced_hit[np.isfinite(hit_cols["vx"])].astype(np.float64),
        "displaced_log_r": np.log10(vertex_r[known & ~prompt]),
        "vertex_z": pd.Series(cols["vz"][prompt]).groupby(
            decode_particle_id(particles[prompt])["vertex_id"]).first().to_numpy(),
        "log_pt": np.log10(np.maximum(np.hypot(cols["px"], cols["py"])[known], 1e-6)),
        "eta": pseudorapidity(cols["px"][known], cols["py"][known], cols["pz"][known]),
    }
    edges, signal, pos = truth_edges(view)
    geometry = edge_geometry(torch.from_numpy(pos), torch.from_numpy(edges)).numpy()
    for i, feature in enumerate(EDGE_FEATURES):
        out[f"edge_{feature}"] = geometry[:, i].astype(np.float64)
        out[f"signal_edge_{feature}"] = geometry[signal, i].astype(np.float64)
    out.update(cluster_samples(view))
    return out


def pool(samples: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """The samples of several events, concatenated per distribution (those all events have)."""
    names = [n for n in samples[0] if all(n in s for s in samples)]
    return {n: np.concatenate([s[n] for s in samples]) for n in names}


def histogram(values: np.ndarray, edges: np.ndarray | None,
              categories: np.ndarray | None = None) -> np.ndarray:
    """Counts of ``values`` over ``edges`` (out-of-range values in the end bins), or over
    ``categories`` when ``edges`` is None."""
    values = np.asarray(values, dtype=np.float64)
    if edges is None:
        return np.array([(values == c).sum() for c in categories], dtype=np.float64)
    index = np.clip(np.searchsorted(edges, values, side="right") - 1, 0, len(edges) - 2)
    return np.bincount(index, minlength=len(edges) - 1).astype(np.float64)


def tvd(a: np.ndarray, b: np.ndarray) -> float:
    """Total variation distance of two histograms (normalised here): 1/2 sum |p_a - p_b|."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.sum() <= 0 or b.sum() <= 0:
        raise ValueError("TVD of an empty histogram")
    return float(0.5 * np.abs(a / a.sum() - b / b.sum()).sum())


def compare(name: str, real: np.ndarray, sim: np.ndarray,
            categories: np.ndarray | None = None,
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Histograms of the real and the simulated sample on ``name``'s fixed bins (and the
    categories for categorical distributions: ``categories``, or those of both samples)."""
    edges = BINS[name]
    if edges is None and categories is None:
        categories = np.union1d(real, sim)
    return histogram(real, edges, categories), histogram(sim, edges, categories), categories


def tvd_floor(sim_hist: np.ndarray, n_real: int, rng: np.random.Generator,
              draws: int = 100) -> float:
    """Median TVD between ``n_real`` values drawn from the simulated histogram and the
    histogram itself: the distance that the finite real sample alone gives (a lower bound:
    hits of one particle are not independent draws)."""
    p = sim_hist / sim_hist.sum()
    return float(np.median([tvd(rng.multinomial(n_real, p), p) for _ in range(draws)]))
