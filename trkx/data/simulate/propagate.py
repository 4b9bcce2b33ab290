"""Propagate all particles of an event through the detector, one layer crossing per step.

Every step advances all live particles together (numpy over particles x layers):

1. for every layer surface, the transverse path ``s`` to its next crossing (cylinder roots or
   disk plane; inside the layer's z or r range; ``s > 0``, and not the surface just crossed
   unless the particle comes back to it);
2. the nearest surface wins; particles with none left the detector;
3. the few candidate modules around the crossing point are intersected exactly (Newton on
   their planes) and tested against their trapezoid: every module crossed gives a hit
   (overlapping modules give two), kept with the hit efficiency;
4. the particle moves to the crossing, scatters (Highland) in the silicon it crossed, loses
   energy there (when ``energy_loss``), and may end there in a hadronic interaction; loopers
   stop after ``max_turning_angle`` of turning.

Each step is a helix in the field at its start (``PhysicsConfig.field_at``: uniform, or the
solenoid's fall-off along the beam).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from trkx.data.detector import Detector
from trkx.data.simulate.geometry import LayerSurfaces
from trkx.data.simulate.helix import (
    azimuth_at,
    cylinder_crossings,
    helix_radius,
    plane_crossing,
    position_at,
    turn_sense,
)
from trkx.data.simulate.physics import (
    REFERENCE_SUPPORT,
    SILICON_INTERACTION_LENGTH,
    SILICON_RADIATION_LENGTH,
    PhysicsConfig,
    highland_angle,
    lose_energy,
    scatter_direction,
)

_MIN_STEP = 1e-3        # mm: a crossing closer than this is the surface we stand on
_SAME_LAYER_STEP = 1.0  # mm: the surface just crossed counts again only beyond this
_MAX_RESIDUAL = 1e-3    # mm: Newton must put the point on the plane to this precision
END_TOLERANCE = 10.0    # mm: crossings this far past a known interaction vertex still count


@dataclass
class Crossings:
    """Module crossings (one row per simulated hit), in no particular order."""

    particle: np.ndarray   # [H] index into the particle arrays
    module: np.ndarray     # [H] detector row
    position: np.ndarray   # [H, 3] true global crossing point, mm
    momentum: np.ndarray   # [H, 3] GeV at the crossing
    path: np.ndarray       # [H] transverse path from the vertex, mm (orders a particle's hits)


def propagate(vertex: np.ndarray, momentum: np.ndarray, charge: np.ndarray, mass: np.ndarray,
              detector: Detector, surfaces: LayerSurfaces, config: PhysicsConfig,
              rng: np.random.Generator, end_point: np.ndarray | None = None) -> Crossings:
    """Simulate the module crossings of particles (``vertex [n,3]`` mm, ``momentum [n,3]`` GeV).

    ``end_point [n, 3]`` ends particles at known interaction vertices: a particle records its
    crossings up to ``END_TOLERANCE`` mm of transverse path beyond the point and stops. Rows of
    +inf mark particles known not to interact, NaN rows particles whose fate is unknown; only
    those (all particles when ``end_point`` is None) get random hadronic interactions.
    """
    n = len(charge)
    pt = np.hypot(momentum[:, 0], momentum[:, 1])
    p_total = np.linalg.norm(momentum, axis=1)
    beta = p_total / np.sqrt(p_total ** 2 + mass ** 2)
    alive = np.flatnonzero((pt >= config.min_pt) & (pt > 0) & (charge != 0))
    pos = vertex.astype(np.float64).copy()
    phi = np.arctan2(momentum[:, 1], momentum[:, 0])
    cot = np.divide(momentum[:, 2], pt, out=np.zeros(n), where=pt > 0)
    turned = np.zeros(n)
    path = np.zeros(n)
    last_layer = np.full(n, -1)
    sense = turn_sense(charge, config.field)
    normals = detector.rotation[:, :, 2]
    barrel = np.flatnonzero(surfaces.is_barrel)
    disks = np.flatnonzero(~surfaces.is_barrel)
    stop_path = np.full(n, np.inf)
    hadronic_scale = np.full(n, config.hadronic_scale)
    if end_point is not None:
        stop_path = _path_to_points(vertex, phi, cot, pt, charge, end_point, config.field)
        hadronic_scale[~np.isnan(end_point).any(axis=1)] = 0.0
    pieces: list[tuple[np.ndarray, ...]] = []
    for _ in range(config.max_crossings):
        if alive.size == 0:
            break
        radius = helix_radius(pt[alive], charge[alive], config.field_at(pos[alive, 2]))
        step, layer = _next_layer(pos[alive], phi[alive], cot[alive], radius, sense[alive],
                                  last_layer[alive], surfaces, barrel, disks)
        curls = turned[alive] + step / radius > config.max_turning_angle
        ended = path[alive] + step > stop_path[alive] + END_TOLERANCE
        keep = np.isfinite(step) & ~curls & ~ended
        alive, step, layer, radius = alive[keep], step[keep], layer[keep], radius[keep]
        if alive.size == 0:
            break
        at = position_at(pos[alive], phi[alive], cot[alive], radius, sense[alive], step)
        long = np.where(surfaces.is_barrel[layer], at[:, 2], np.hypot(at[:, 0], at[:, 1]))
        cand = surfaces.candidate_modules(layer, np.arctan2(at[:, 1], at[:, 0]), long)
        rows, cols = np.nonzero(cand >= 0)
        modules = cand[rows, cols]
        who = alive[rows]
        s_mod, residual = plane_crossing(
            pos[who], phi[who], cot[who], radius[rows], sense[who], normals[modules],
            detector.center[modules], step[rows], iterations=5)
        point = position_at(pos[who], phi[who], cot[who], radius[rows], sense[who], s_mod)
        local = detector.global_to_local(modules, point)
        hit = ((residual < _MAX_RESIDUAL) & (s_mod > _MIN_STEP)
               & detector.contains(modules, local[:, 0], local[:, 1]))
        rows, modules, who, s_mod, point = (rows[hit], modules[hit], who[hit], s_mod[hit],
                                            point[hit])
        direction_phi = azimuth_at(phi[who], radius[rows], sense[who], s_mod)
        mom = np.stack([pt[who] * np.cos(direction_phi), pt[who] * np.sin(direction_phi),
                        pt[who] * cot[who]], axis=1)
        cos_incidence = np.abs(np.einsum("ij,ij->i", mom, normals[modules])) / p_total[who]
        material = np.zeros(alive.size)
        np.add.at(material, rows, detector.thickness[modules] / np.maximum(cos_incidence, 0.05))
        material *= 1.0 + config.support_fraction
        recorded = ((rng.random(who.size) < config.hit_efficiency)
                    & (cos_incidence >= config.min_incidence_cos))
        pieces.append((who[recorded], modules[recorded], point[recorded], mom[recorded],
                       path[who][recorded] + s_mod[recorded]))
        # move to the layer crossing, then apply the material of the modules crossed there
        pos[alive] = at
        phi[alive] = azimuth_at(phi[alive], radius, sense[alive], step)
        turned[alive] += step / radius
        path[alive] += step
        last_layer[alive] = layer
        crossed = material > 0
        if config.multiple_scattering and crossed.any():
            idx = alive[crossed]
            theta0 = highland_angle(p_total[idx], beta[idx], charge[idx],
                                    material[crossed] / SILICON_RADIATION_LENGTH)
            new_phi, new_cot = scatter_direction(phi[idx], cot[idx], theta0, rng)
            phi[idx], cot[idx] = new_phi, new_cot
            pt[idx] = p_total[idx] / np.sqrt(1.0 + new_cot ** 2)
        if config.energy_loss > 0 and crossed.any():
            idx = alive[crossed]
            p_total[idx] = lose_energy(p_total[idx], material[crossed], config.energy_loss)
            beta[idx] = p_total[idx] / np.sqrt(p_total[idx] ** 2 + mass[idx] ** 2)
            pt[idx] = p_total[idx] / np.sqrt(1.0 + cot[idx] ** 2)
        reference = material * ((1.0 + REFERENCE_SUPPORT) / (1.0 + config.support_fraction))
        interacts = rng.random(alive.size) < hadronic_scale[alive] * (
            1.0 - np.exp(-reference / SILICON_INTERACTION_LENGTH))
        alive = alive[~interacts]
    if not pieces:
        empty = np.zeros(0, dtype=np.int64)
        return Crossings(empty, empty, np.zeros((0, 3)), np.zeros((0, 3)), np.zeros(0))
    return Crossings(*(np.concatenate(arrays) for arrays in zip(*pieces)))


def _path_to_points(vertex: np.ndarray, phi: np.ndarray, cot: np.ndarray, pt: np.ndarray,
                    charge: np.ndarray, point: np.ndarray, field: float) -> np.ndarray:
    """Transverse path from each vertex to ``point`` along the unscattered helix (inf if NaN).

    From the transverse chord ``c``: ``s = 2 R arcsin(c / 2R)``; for steep tracks
    (``|cot theta| > 1``) from the z distance, ``s = dz / cot theta``, which stays exact over
    several turns.
    """
    radius = helix_radius(pt, charge, field)
    chord = np.hypot(point[:, 0] - vertex[:, 0], point[:, 1] - vertex[:, 1])
    with np.errstate(invalid="ignore", divide="ignore"):
        s_chord = 2.0 * radius * np.arcsin(np.clip(chord / (2.0 * radius), 0.0, 1.0))
        s_z = (point[:, 2] - vertex[:, 2]) / cot
    s = np.where((np.abs(cot) > 1.0) & (s_z > 0), s_z, s_chord)
    return np.where(np.isfinite(point).all(axis=1) & np.isfinite(s), s, np.inf)


def _forget_surface_just_crossed(steps: np.ndarray, last_layer: np.ndarray) -> None:
    """The surface a particle stands on counts only when it comes back to it (in place)."""
    rows = np.flatnonzero(last_layer >= 0)
    same = steps[rows, last_layer[rows]]
    steps[rows, last_layer[rows]] = np.where(same > _SAME_LAYER_STEP, same, np.inf)


def _next_layer(pos: np.ndarray, phi: np.ndarray, cot: np.ndarray, radius: np.ndarray,
                sense: np.ndarray, last_layer: np.ndarray, surfaces: LayerSurfaces,
                barrel: np.ndarray, disks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Path length to, and index of, the nearest layer surface ahead (inf, -1 if none)."""
    n = pos.shape[0]
    steps = np.full((n, surfaces.n_layers), np.inf)
    column = lambda a: a[:, None]
    s1, s2 = cylinder_crossings(pos[:, None, :], column(phi), column(radius), column(sense),
                                surfaces.position[barrel][None, :])
    for s in (s1, s2):
        z = pos[:, 2:3] + s * column(cot)
        ok = (s > _MIN_STEP) & (z >= surfaces.low[barrel]) & (z <= surfaces.high[barrel])
        steps[:, barrel] = np.minimum(steps[:, barrel], np.where(ok, s, np.inf))
    _forget_surface_just_crossed(steps, last_layer)
    best_barrel = steps.min(axis=1)
    # disks: s from z alone; the radius (trigonometry) only where the disk could win
    with np.errstate(divide="ignore", invalid="ignore"):
        s = (surfaces.position[disks][None, :] - pos[:, 2:3]) / column(cot)
    rows, cols = np.nonzero(np.isfinite(s) & (s > _MIN_STEP) & (s < column(best_barrel)))
    s_pair = s[rows, cols]
    at = position_at(pos[rows], phi[rows], cot[rows], radius[rows], sense[rows], s_pair)
    r = np.hypot(at[:, 0], at[:, 1])
    inside = (r >= surfaces.low[disks[cols]]) & (r <= surfaces.high[disks[cols]])
    steps[rows[inside], disks[cols[inside]]] = s_pair[inside]
    _forget_surface_just_crossed(steps, last_layer)
    layer = np.argmin(steps, axis=1)
    step = steps[np.arange(n), layer]
    return step, np.where(np.isfinite(step), layer, -1)
