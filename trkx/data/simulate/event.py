"""One complete simulated event: particles -> crossings -> clusters -> hits, cells, truth.

``simulate_event`` is pure (tables in, tables out): propagation (:mod:`.propagate`), clusters
and centroids (:mod:`.cells`), noise (:mod:`.noise`), then the four TrackML tables:

* hits ordered by (volume, layer, module) like the real files, ``hit_id`` from 1; the hit
  position is the cluster centroid on the module plane, in global coordinates;
* truth: the true crossing point ``tx..tz`` and momentum ``tpx..tpz`` (noise: the hit position
  and zero momentum), with the challenge's hit weights (:func:`trkx.data.weights.hit_weights`);
* particles with ``nhits`` = their number of hits.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from trkx.data.detector import Detector, load_detector
from trkx.data.simulate.cells import make_clusters
from trkx.data.simulate.geometry import layer_surfaces_for
from trkx.data.simulate.noise import noise_directions, noise_modules, uniform_local_points
from trkx.data.simulate.particles import particle_masses
from trkx.data.simulate.physics import PhysicsConfig
from trkx.data.simulate.propagate import propagate
from trkx.data.weights import hit_weights


@dataclass(frozen=True)
class SimulationConfig:
    """Everything that shapes a simulated event besides its particles and seed."""

    physics: PhysicsConfig = field(default_factory=PhysicsConfig)
    noise_fraction: float = 0.17   # share of noise among all hits
    noise_direction_spread: float = 0.3   # noise crossings: random part of the direction


def simulate_event(particles: pd.DataFrame, rng: np.random.Generator,
                   config: SimulationConfig | None = None, detector: Detector | None = None,
                   end_points: np.ndarray | None = None) -> dict[str, pd.DataFrame]:
    """Simulate the hits, cells and truth of ``particles``; returns the four event tables.

    ``particles`` needs ``particle_id, vx, vy, vz, px, py, pz, q`` (``particle_type`` optional,
    used for the mass in multiple scattering); its ``nhits`` is (re)computed. ``end_points``
    ``[n, 3]`` (NaN = none) are known interaction vertices where particles end, as
    :func:`~trkx.data.simulate.particles.interaction_points` reads them from a real table;
    when given, they replace the random hadronic interactions.
    """
    config = config or SimulationConfig()
    detector = detector or load_detector()
    physics = config.physics
    surfaces = layer_surfaces_for(detector)
    vertex = particles[["vx", "vy", "vz"]].to_numpy(np.float64)
    momentum = particles[["px", "py", "pz"]].to_numpy(np.float64)
    charge = particles["q"].to_numpy(np.float64)
    crossings = propagate(vertex, momentum, charge, particle_masses(particles), detector,
                          surfaces, physics, rng, end_point=end_points)
    modules = crossings.module
    local = detector.global_to_local(modules, crossings.position)
    p_local = np.einsum("kji,kj->ki", detector.rotation[modules], crossings.momentum)
    direction = p_local / np.maximum(np.linalg.norm(p_local, axis=1, keepdims=True), 1e-30)
    signal = make_clusters(detector, modules, local[:, :2], direction, rng, dedx=physics.dedx,
                           spread=physics.cluster_spread, threshold=physics.pixel_threshold,
                           lorentz=physics.lorentz_tan, endcap_depth=physics.endcap_depth)

    noise_rows = noise_modules(detector, modules, config.noise_fraction, rng)
    noise_local = uniform_local_points(detector, noise_rows, rng)
    noise_direction = noise_directions(detector, noise_rows, noise_local, rng,
                                       config.noise_direction_spread)
    noise = make_clusters(detector, noise_rows, noise_local, noise_direction, rng,
                          dedx=physics.dedx, spread=physics.cluster_spread,
                          threshold=physics.pixel_threshold, lorentz=physics.lorentz_tan,
                          endcap_depth=physics.endcap_depth)

    n_signal = modules.size
    all_modules = np.concatenate([modules, noise_rows])
    centroid = np.concatenate([signal.centroid, noise.centroid])
    measured = detector.local_to_global(all_modules, centroid)
    # hits in (volume, layer, module) order, random order inside a module
    order = np.lexsort((rng.random(all_modules.size), detector.volume_id[all_modules] * 10**8
                        + detector.layer_id[all_modules] * 10**5
                        + detector.module_id[all_modules]))
    hit_id = np.empty(all_modules.size, dtype=np.int64)
    hit_id[order] = np.arange(1, all_modules.size + 1)
    hits = pd.DataFrame({
        "hit_id": hit_id[order],
        "x": measured[order, 0], "y": measured[order, 1], "z": measured[order, 2],
        "volume_id": detector.volume_id[all_modules[order]],
        "layer_id": detector.layer_id[all_modules[order]],
        "module_id": detector.module_id[all_modules[order]]})

    # cells come out of make_clusters grouped by hit and sorted by (ch0, ch1) inside a hit
    cell_hit = np.concatenate([signal.hit, noise.hit + n_signal])
    cell_order = np.argsort(hit_id[cell_hit], kind="stable")
    cells = pd.DataFrame({
        "hit_id": hit_id[cell_hit][cell_order],
        "ch0": np.concatenate([signal.ch0, noise.ch0])[cell_order],
        "ch1": np.concatenate([signal.ch1, noise.ch1])[cell_order],
        "value": np.concatenate([signal.value, noise.value])[cell_order]})

    pid = particles["particle_id"].to_numpy(np.int64)
    true_pos = np.concatenate([crossings.position, measured[n_signal:]])
    true_mom = np.concatenate([crossings.momentum, np.zeros((noise_rows.size, 3))])
    truth = pd.DataFrame({
        "hit_id": hit_id,
        "particle_id": np.concatenate([pid[crossings.particle],
                                       np.zeros(noise_rows.size, dtype=np.int64)]),
        "tx": true_pos[:, 0], "ty": true_pos[:, 1], "tz": true_pos[:, 2],
        "tpx": true_mom[:, 0], "tpy": true_mom[:, 1], "tpz": true_mom[:, 2]})
    truth = truth.sort_values("hit_id").reset_index(drop=True)
    out_particles = particles.copy()
    out_particles["nhits"] = np.bincount(crossings.particle, minlength=len(particles))
    truth["weight"] = hit_weights(truth, out_particles)
    return {"hits": hits, "cells": cells, "particles": out_particles.reset_index(drop=True),
            "truth": truth}
