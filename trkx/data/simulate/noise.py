"""Noise hits: extra hits with ``particle_id = 0``, spread over modules like real occupancy.

Real noise is far from uniform: the TrackML sample event (the only real event with truth)
has a noise share of 5-6% in the pixel volumes and 14-58% in the strips. The expected noise
count of volume ``v`` is ``k * r_v * n_v`` with ``n_v`` the event's particle hits in that volume,
``r_v = share_v / (1 - share_v)`` the measured noise-to-signal ratio, and ``k`` chosen so that
noise makes up ``fraction`` of all hits. Each noise hit sits on the module of a random particle
hit of its volume (so it follows the event's occupancy) at a uniform point of the trapezoid,
with the cluster of a crossing in a random direction (:func:`noise_directions`: from the
origin, plus a Gaussian of 0.3 per axis, fitted on the noise clusters of the real sample event):
real noise hits are the crossings of particles missing from the record (low-energy
secondaries), and their clusters are as wide as the particles' or wider, rarely single cells.
"""

from __future__ import annotations

import numpy as np

from trkx.data.detector import Detector

#: Noise share per volume in the real sample event (noise hits / all hits of the volume).
NOISE_SHARE = {7: 0.0507, 8: 0.0613, 9: 0.0461, 12: 0.144, 13: 0.194, 14: 0.141, 16: 0.168,
               17: 0.576, 18: 0.252}


def noise_modules(detector: Detector, signal_modules: np.ndarray, fraction: float,
                  rng: np.random.Generator) -> np.ndarray:
    """Module rows of the noise hits for an event whose particle hits lie on ``signal_modules``."""
    if signal_modules.size == 0 or fraction <= 0:
        return np.zeros(0, dtype=np.int64)
    volumes = detector.volume_id[signal_modules]
    ratio = np.array([NOISE_SHARE.get(int(v), 0.1) for v in range(max(NOISE_SHARE) + 1)])
    ratio = ratio / (1.0 - ratio)
    per_hit = ratio[np.minimum(volumes, len(ratio) - 1)]
    scale = fraction / (1.0 - fraction) * signal_modules.size / per_hit.sum()
    probability = per_hit / per_hit.sum()
    n_noise = int(rng.poisson(scale * per_hit.sum()))
    return signal_modules[rng.choice(signal_modules.size, size=n_noise, p=probability)]


def uniform_local_points(detector: Detector, modules: np.ndarray, rng: np.random.Generator,
                         ) -> np.ndarray:
    """Uniform points ``[n, 2]`` inside the trapezoids of ``modules`` (rejection sampling)."""
    points = np.zeros((modules.size, 2))
    todo = np.arange(modules.size)
    while todo.size:
        m = modules[todo]
        u = rng.uniform(-1, 1, todo.size) * detector.max_hu[m]
        v = rng.uniform(-1, 1, todo.size) * detector.hv[m]
        inside = detector.contains(m, u, v)
        points[todo[inside]] = np.stack([u[inside], v[inside]], 1)
        todo = todo[~inside]
    return points


def noise_directions(detector: Detector, modules: np.ndarray, local_points: np.ndarray,
                     rng: np.random.Generator, spread: float = 0.3) -> np.ndarray:
    """``[n, 3]`` local unit directions of noise crossings: the direction from the origin to the
    hit plus a Gaussian vector of ``spread`` per axis (global frame), normalised."""
    uvw = np.concatenate([local_points, np.zeros((modules.size, 1))], axis=1)
    position = detector.local_to_global(modules, uvw)
    d = position / np.maximum(np.linalg.norm(position, axis=1, keepdims=True), 1e-9)
    d = d + spread * rng.standard_normal(d.shape)
    d /= np.maximum(np.linalg.norm(d, axis=1, keepdims=True), 1e-12)
    return np.einsum("kji,kj->ki", detector.rotation[modules], d)
