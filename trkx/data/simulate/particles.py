"""Particles to simulate: the built-in generator, and replay of real particle tables.

Generator (distributions fitted to real TrackML tables, :mod:`.fitted_spectra`), for pile-up
``mu``:

* ``Poisson(mu * prompt_per_mu / E[multiplicity])`` primary vertices at ``(N(0, s_xy),
  N(0, s_xy), N(0, s_z))``, each with a particle multiplicity drawn from the real per-vertex
  table (so the mean prompt count is the real one, scaled by ``mu / 200``); ``s_z``, the
  length of the luminous region, is the fitted one (5.49 mm, the Kaggle training release)
  unless ``vertex_sigma_z`` is given (the later release of the challenge data, to which the
  real event 21001 and the sample event belong, has ``s_z`` ~ 50 mm);
* prompt particles: ``log10 pT`` and ``eta`` from their real quantile tables, ``phi`` uniform,
  charge +-1 with the real share;
* displaced (secondary) particles, ``displaced_per_prompt`` times as many: production point
  ``(log10 r, z)`` from the real 2-D histogram at uniform azimuth, momentum direction relative
  to it (``phi_p - phi_x`` from the real table of its pT bin, and ``eta_p - eta_x`` from the
  real table of the point's ``|eta_x|`` bin and its pT bin: a secondary above 0.5 GeV flies on
  from where it is made) and ``log10 pT`` from the real table of the point's ``(r, |z|)`` cell
  (near the beam the real secondaries are harder; :mod:`.spectra`); each is attached
  to a random prompt particle as its descendant;
* the challenge's acceptance, ``|eta| <= ETA_MAX = 4`` for every particle: the real tables hold
  none beyond it, displaced ones included. The prompt table ends there, and the direction
  tables per ``|eta_x|`` bin put few displaced particles beyond it; such a particle draws its
  production point and direction again, from a generator spawned off the event's
  (``rng.spawn``, which leaves the event's stream as it was), until it lies inside: rejection
  sampling of the real, accepted spectrum.

Particle ids follow the bit layout of the real TrackML files (:mod:`trkx.data.particle_id`):
primary vertex, primary particle, generation (0 = primary), index among the secondaries of
that ancestor, process (0 here).

Particle types: pions, kaons and protons in the proportions of the real sample event.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd

from trkx.data.io import event_id_from_prefix, read_part
from trkx.data.particle_id import decode_particle_id, encode_particle_id
from trkx.data.simulate.fitted_spectra import FIT
from trkx.data.simulate.spectra import (
    LOG_R_BINS,
    QUANTILE_LEVELS,
    Z_BINS,
    direction_cell,
    displaced_cell,
    pt_bin,
    sample_binned_quantiles,
    sample_histogram2d,
    sample_quantiles,
)
from trkx.files.errors import TrackMLFormatError

#: PDG id magnitudes and their share among charged hadrons (real sample event), and masses.
PARTICLE_TYPES = np.array([211, 321, 2212])
TYPE_SHARES = np.array([0.79, 0.07, 0.14])
MASSES = {211: 0.13957, 321: 0.49368, 2212: 0.93827, 11: 0.000511, 13: 0.10566}
PION_MASS = MASSES[211]
#: |eta| of the challenge's particles: 18 Kaggle particle tables hold no particle beyond 4.0.
ETA_MAX = 4.0


def generate_particles(mu: float, rng: np.random.Generator,
                       vertex_sigma_z: float | None = None) -> pd.DataFrame:
    """A particles table (no ``nhits`` yet) for pile-up ``mu`` (see module docstring), primary
    vertices spread by ``N(0, vertex_sigma_z)`` mm along the beam (None: the fitted value)."""
    sigma_z = FIT["vertex_sigma_z"] if vertex_sigma_z is None else float(vertex_sigma_z)
    if not (np.isfinite(sigma_z) and sigma_z > 0):
        raise ValueError(f"vertex_sigma_z must be a positive number of mm, got {vertex_sigma_z}")
    mean_multiplicity = np.trapezoid(FIT["vertex_multiplicity"], QUANTILE_LEVELS)
    n_vertices = max(1, int(rng.poisson(mu * FIT["prompt_per_mu"] / mean_multiplicity)))
    multiplicity = np.maximum(1, np.round(
        sample_quantiles(FIT["vertex_multiplicity"], n_vertices, rng))).astype(np.int64)
    vertex_pos = np.stack([rng.normal(0, FIT["vertex_sigma_xy"], n_vertices),
                           rng.normal(0, FIT["vertex_sigma_xy"], n_vertices),
                           rng.normal(0, sigma_z, n_vertices)], 1)
    n_prompt = int(multiplicity.sum())
    vertex_of = np.repeat(np.arange(n_vertices), multiplicity)
    number = np.arange(n_prompt) - np.repeat(np.cumsum(multiplicity) - multiplicity, multiplicity)
    pt = 10 ** sample_quantiles(FIT["prompt_log_pt"], n_prompt, rng)
    eta = sample_quantiles(FIT["prompt_eta"], n_prompt, rng)
    phi = rng.uniform(-np.pi, np.pi, n_prompt)
    charge = np.where(rng.random(n_prompt) < FIT["prompt_positive_share"], 1, -1)
    prompt = pd.DataFrame({
        "particle_id": encode_particle_id(vertex_of + 1, number + 1),
        "vx": vertex_pos[vertex_of, 0], "vy": vertex_pos[vertex_of, 1],
        "vz": vertex_pos[vertex_of, 2],
        "px": pt * np.cos(phi), "py": pt * np.sin(phi), "pz": pt * np.sinh(eta), "q": charge})

    n_displaced = int(rng.poisson(n_prompt * FIT["displaced_per_prompt"]))
    r, z, pt_d, eta_p = _displaced_points(n_displaced, rng)
    r, z, pt_d, eta_p = _inside_acceptance(r, z, pt_d, eta_p, rng)
    phi_x = rng.uniform(-np.pi, np.pi, n_displaced)
    phi_p = phi_x + sample_binned_quantiles(FIT["displaced_dphi_by_pt"], pt_bin(pt_d), rng)
    parent = rng.integers(0, n_prompt, n_displaced)
    order = np.argsort(parent, kind="stable")
    rank = np.empty(n_displaced, dtype=np.int64)
    sorted_parent = parent[order]
    starts = np.searchsorted(sorted_parent, sorted_parent, side="left")
    rank[order] = np.arange(n_displaced) - starts
    displaced = pd.DataFrame({
        "particle_id": encode_particle_id(vertex_of[parent] + 1, number[parent] + 1,
                                          generation=1, secondary_id=np.minimum(rank + 1, 4095)),
        "vx": r * np.cos(phi_x), "vy": r * np.sin(phi_x), "vz": z,
        "px": pt_d * np.cos(phi_p), "py": pt_d * np.sin(phi_p), "pz": pt_d * np.sinh(eta_p),
        "q": np.where(rng.random(n_displaced) < FIT["displaced_positive_share"], 1, -1)})
    table = pd.concat([prompt, displaced], ignore_index=True)
    kind = rng.choice(PARTICLE_TYPES, size=len(table), p=TYPE_SHARES)
    table.insert(1, "particle_type", kind * table["q"].to_numpy())
    return table.drop_duplicates("particle_id").reset_index(drop=True)


def _displaced_points(n: int, rng: np.random.Generator,
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``n`` displaced production points ``(r, z)`` from the real 2-D histogram, their pT from
    the real table of the point's ``(r, |z|)`` cell, and ``eta_p = eta_x + s d`` with ``eta_x
    = asinh(z / r)``, ``s = sign(eta_x)`` and ``d`` from the real table of the ``|eta_x|`` bin
    and the pT bin (:mod:`.spectra`)."""
    log_r, z = sample_histogram2d(np.asarray(FIT["displaced_position_hist"]), LOG_R_BINS, Z_BINS,
                                  n, rng)
    r = 10 ** log_r
    pt = 10 ** sample_binned_quantiles(FIT["displaced_log_pt_by_position"],
                                       displaced_cell(r, z), rng)
    eta_x = np.arcsinh(z / r)
    side = np.where(eta_x < 0, -1.0, 1.0)
    eta_p = eta_x + side * sample_binned_quantiles(FIT["displaced_deta_by_eta_x_pt"],
                                                   direction_cell(eta_x, pt), rng)
    return r, z, pt, eta_p


def _inside_acceptance(r: np.ndarray, z: np.ndarray, pt: np.ndarray, eta_p: np.ndarray,
                       rng: np.random.Generator, max_rounds: int = 1000,
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Displaced production points ``(r, z)``, pT and pseudorapidities with every ``|eta_p| >
    ETA_MAX`` drawn again (point, pT and direction together) until inside; ``rng`` only
    spawns the generator of the redraws, so its own stream is untouched."""
    outside = np.flatnonzero(np.abs(eta_p) > ETA_MAX)
    if len(outside) == 0:
        return r, z, pt, eta_p
    redraw = rng.spawn(1)[0]
    r, z, pt, eta_p = r.copy(), z.copy(), pt.copy(), eta_p.copy()
    for _ in range(max_rounds):
        r_new, z_new, pt_new, eta_new = _displaced_points(len(outside), redraw)
        r[outside], z[outside], pt[outside], eta_p[outside] = r_new, z_new, pt_new, eta_new
        outside = outside[np.abs(eta_new) > ETA_MAX]
        if len(outside) == 0:
            return r, z, pt, eta_p
    raise RuntimeError(f"{len(outside)} displaced particles still beyond |eta| = {ETA_MAX} "
                       f"after {max_rounds} redraws: the fitted spectra cannot reach it")


def particle_masses(particles: pd.DataFrame) -> np.ndarray:
    """Mass (GeV) per particle from ``particle_type`` (pion when absent or unknown)."""
    if "particle_type" not in particles:
        return np.full(len(particles), PION_MASS)
    kinds = np.abs(particles["particle_type"].to_numpy())
    return np.array([MASSES.get(int(k), PION_MASS) for k in kinds]) if len(kinds) else \
        np.zeros(0)


def interaction_points(particles: pd.DataFrame, min_distance: float = 1.0) -> np.ndarray:
    """Where each particle of a real table ended in a hadronic interaction ``[n, 3]``.

    A real table lists the products of a primary's interaction as its descendants: the same
    primary-vertex and primary-particle fields and generation 1. A primary (generation 0) ends
    at the production vertex of its first descendant (the one closest to its own vertex, at
    least ``min_distance`` mm away); a primary without descendants did not interact (+inf).
    Later generations cannot be matched to their products, so their end is unknown (NaN) and
    left to the random interaction model.
    """
    fields = decode_particle_id(particles["particle_id"].to_numpy())
    vertex = particles[["vx", "vy", "vz"]].to_numpy(np.float64)
    ends = np.full((len(particles), 3), np.nan)
    key = fields["vertex_id"] * (1 << 16) + fields["primary_id"]
    parents = np.flatnonzero(fields["generation"] == 0)
    children = np.flatnonzero(fields["generation"] == 1)
    ends[parents] = np.inf
    if parents.size == 0 or children.size == 0:
        return ends
    parent_of_key = pd.Series(parents, index=key[parents])
    parent_of_key = parent_of_key[~parent_of_key.index.duplicated()]
    parent = parent_of_key.reindex(key[children]).to_numpy()
    known = ~np.isnan(parent)
    children, parent = children[known], parent[known].astype(np.int64)
    distance = np.linalg.norm(vertex[children] - vertex[parent], axis=1)
    far = distance >= min_distance
    children, parent, distance = children[far], parent[far], distance[far]
    order = np.lexsort((distance, parent))
    first = np.ones(order.size, dtype=bool)
    first[1:] = parent[order][1:] != parent[order][:-1]
    chosen = order[first]
    ends[parent[chosen]] = vertex[children[chosen]]
    return ends


def particle_sources(path: str | os.PathLike) -> list[tuple[int, Path]]:
    """``(event_id, file)`` of every particle table in a file or a folder, sorted by id."""
    path = Path(path)
    if path.is_dir():
        files = sorted(path.glob("event*-particles.csv*"))
        if not files:
            raise FileNotFoundError(f"{path}: no event*-particles.csv[.gz] files in this folder")
    elif path.is_file():
        files = [path]
    else:
        raise FileNotFoundError(f"{path}: no such particle file or folder")
    sources = []
    for file in files:
        name = file.name.split("-particles.csv")[0]
        try:
            sources.append((event_id_from_prefix(name), file))
        except TrackMLFormatError as exc:
            raise TrackMLFormatError(f"{file}: cannot read the event id from the name "
                                     "(expected eventNNNNNNNNN-particles.csv[.gz])") from exc
    return sorted(sources)


def load_particles(file: str | os.PathLike) -> pd.DataFrame:
    """A real particle table to replay (validated; ``nhits`` is recomputed by the simulation)."""
    table = read_part(file, "particles")
    return table.drop(columns=["nhits"])
