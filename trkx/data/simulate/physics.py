"""Material effects at a module crossing: multiple scattering, energy loss, hadronic interactions.

A crossing of silicon thickness ``t`` at incidence ``cos(alpha) = |d . n|`` (unit direction ``d``,
module normal ``n``) traverses ``x = t (1 + f_support) / cos(alpha)`` of material, where
``f_support`` adds the cooling, cables and mechanics as a fraction of the silicon.

* Multiple scattering (Highland, PDG eq. 34.15): the projected scattering angle is Gaussian with

      theta0 = 13.6 MeV / (beta c p) |q| sqrt(x / X0) (1 + 0.038 ln(x q^2 / (X0 beta^2))),

  applied independently on two axes perpendicular to the direction (``X0(Si) = 93.7 mm``).
* Energy loss (``energy_loss``, MeV per mm of the silicon-equivalent material ``x``; 0, off, by
  default): ``dE = energy_loss x``, taken off the momentum's magnitude at each crossing (the
  direction kept): ``p -> max(p - dE, p / 2)``. Silicon alone loses 0.388 MeV/mm (a
  minimum-ionising particle's mean, PDG: 1.664 MeV cm^2/g x 2.33 g/cm^3); the low-Z support
  (carbon fibre, cables, coolant) loses 2-2.5x silicon's energy per radiation length, so the
  fit to real tracks is larger.
* Hadronic interaction: the particle ends at the crossing with probability
  ``k (1 - exp(-x_ref / lambda_I))`` (``lambda_I(Si) = 465 mm``), on the material at the
  calibration's support, ``x_ref = 2 t / cos(alpha)`` (``f_support = 1``): more support
  scatters more without changing the fitted interaction rate. The scale ``k = 10`` is
  calibrated on the real tables: real primaries with pT > 1 GeV end early in ~15% of cases
  (they have interaction products in the table), which ``k = 10`` reproduces (mean 11.1 hits
  per pT > 1 GeV particle, real 11.05); the extra material is the low-Z support and services,
  whose interaction length per radiation length is far above silicon's.

The material fit (``support_fraction`` 5.9, ``energy_loss`` 1.2 MeV/mm): the real sample
event's true crossings of prompt 1-2 GeV particles lie 5.0 um (median RMS) from a circle
through their pixel hits, against 2.7 um at ``f_support = 1``: (5.0 / 2.7)^2 = 3.4x the
scattering material, ``1 + f = 6.9``; they lose 0.77% of their pT between the first and last
crossing, which silicon's 0.388 MeV/mm over that material gives a third of
(``benchmarks/sim_vs_real.py --material``, docs/levers.md).

The field. ``field_map="uniform"`` is a constant ``Bz = field``; ``"solenoid"`` falls off along
the beam as the real events' field does:

    Bz(z) = field (1 + exp(-h / w)) / (1 + exp((|z| - h) / w)),   h = 1924 mm, w = 381 mm,

fitted to the real sample event's truth (each particle's curvature through three consecutive
true crossings against its momentum there: 2.00 T up to |z| ~ 400 mm, 1.85 T at 900 mm, 1.6-1.7
T at 1,300 mm, 1.3 T at 1,750 mm, 0.2-0.6 T beyond 2,000 mm; docs/levers.md). The propagator
takes the field at the start of each step between layers.

Other measurement rules, all fitted to the real files (see the realism benchmark):

* crossings with ``|cos(incidence)| < min_incidence_cos`` (0.1) leave no hit: real events have
  no pixel-barrel hit from prompt tracks beyond |eta| = 3 (grazing incidence);
* particles produced with pT < ``min_pt`` (0.15 GeV) are not simulated: 97% of the real ones
  have no hit;
* loopers stop when they curl back (``max_turning_angle`` = pi of turning);
* each crossed module records a hit with probability ``hit_efficiency`` (0.98).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

SILICON_RADIATION_LENGTH = 93.7      # mm
SILICON_INTERACTION_LENGTH = 465.0   # mm
REFERENCE_SUPPORT = 1.0              # the support fraction at which hadronic_scale was fitted
#: The solenoid's fall-off along the beam (module docstring), fitted to the real sample event.
SOLENOID_HALF_LENGTH = 1924.0        # mm, h
SOLENOID_EDGE_WIDTH = 381.0          # mm, w
FIELD_MAPS: tuple[str, ...] = ("uniform", "solenoid")


@dataclass(frozen=True)
class PhysicsConfig:
    """Physics switches and constants of the simulation (all configurable)."""

    field: float = 2.0                     # T, along +z (at z = 0 with the solenoid map)
    field_map: str = "uniform"             # uniform | solenoid (falls off along the beam)
    support_fraction: float = 1.0          # extra material per crossing, as a fraction of Si
    multiple_scattering: bool = True
    energy_loss: float = 0.0               # MeV per mm of material crossed (0: none)
    hadronic_scale: float = 10.0           # x the silicon-only interaction probability
    hit_efficiency: float = 0.98           # probability that a crossed module records a hit
    max_turning_angle: float = np.pi     # loopers stop when they curl back (rad of turning)
    max_crossings: int = 40                # safety cap on layer crossings per particle
    min_incidence_cos: float = 0.1         # grazing crossings (|cos| below) leave no cluster
    min_pt: float = 0.15                   # GeV: particles produced below are not simulated
    dedx: float = 2.0                      # charge per mm of silicon path (cell values)
    cluster_spread: float = 0.0            # charge-sharing width (in pitches) for cells
    pixel_threshold: float = 0.0           # drop cells under this fraction of a cluster's max
    lorentz_tan: float = 0.11              # tan(Lorentz angle): charge drift per unit depth
    endcap_depth: tuple[float, float] = (2.4, 1.7)   # endcap segment factor: pixel, strip


    def __post_init__(self) -> None:
        if self.field_map not in FIELD_MAPS:
            raise ValueError(f"field_map {self.field_map!r} is not one of {', '.join(FIELD_MAPS)}")
        if not (np.isfinite(self.support_fraction) and self.support_fraction >= 0):
            raise ValueError(f"support_fraction must be >= 0, got {self.support_fraction}")
        if not (np.isfinite(self.energy_loss) and self.energy_loss >= 0):
            raise ValueError(f"energy_loss must be >= 0 MeV/mm, got {self.energy_loss}")

    def field_at(self, z: np.ndarray) -> np.ndarray:
        """Bz (T) at the points of z coordinate ``z`` (mm): the module docstring's map."""
        z = np.asarray(z, dtype=np.float64)
        if self.field_map == "uniform":
            return np.full(z.shape, self.field)
        h, w = SOLENOID_HALF_LENGTH, SOLENOID_EDGE_WIDTH
        return self.field * (1.0 + np.exp(-h / w)) / (1.0 + np.exp((np.abs(z) - h) / w))


def highland_angle(momentum: np.ndarray, beta: np.ndarray, charge: np.ndarray,
                   thickness_x0: np.ndarray) -> np.ndarray:
    """Projected RMS scattering angle (rad) for momentum (GeV) through ``x / X0``."""
    x0 = np.maximum(thickness_x0, 1e-12)
    q = np.abs(charge)
    log_term = 1.0 + 0.038 * np.log(x0 * q * q / np.maximum(beta * beta, 1e-12))
    return 0.0136 / np.maximum(beta * momentum, 1e-12) * q * np.sqrt(x0) * np.maximum(log_term,
                                                                                       0.0)


def lose_energy(momentum: np.ndarray, material: np.ndarray, loss: float) -> np.ndarray:
    """Momentum (GeV) after losing ``loss`` MeV per mm through ``material`` mm:
    ``max(p - loss x, p / 2)`` (the floor keeps a slow particle's step finite; such a particle
    ranges out within a few crossings anyway)."""
    return np.maximum(momentum - 1e-3 * loss * material, 0.5 * momentum)


def scatter_direction(phi: np.ndarray, cot: np.ndarray, theta0: np.ndarray,
                      rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """New ``(phi, cot(theta))`` after Gaussian kicks of RMS ``theta0`` on two transverse axes.

    With ``d = (sin t cos p, sin t sin p, cos t)``, ``e1 = (-sin p, cos p, 0)`` and
    ``e2 = (cos t cos p, cos t sin p, -sin t)``: ``d' = normalise(d + a1 e1 + a2 e2)``.
    """
    theta = np.arctan2(1.0, cot)
    a1 = rng.standard_normal(phi.shape) * theta0
    a2 = rng.standard_normal(phi.shape) * theta0
    st, ct, sp, cp = np.sin(theta), np.cos(theta), np.sin(phi), np.cos(phi)
    dx = st * cp - a1 * sp + a2 * ct * cp
    dy = st * sp + a1 * cp + a2 * ct * sp
    dz = ct - a2 * st
    transverse = np.hypot(dx, dy)
    return np.arctan2(dy, dx), dz / np.maximum(transverse, 1e-12)
