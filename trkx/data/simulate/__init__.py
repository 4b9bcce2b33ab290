"""Realistic TrackML event simulation on the real detector geometry.

Modules: :mod:`.particles` (generator fitted to real tables, replay, particle-id bit fields),
:mod:`.helix` (helix algebra), :mod:`.geometry` (layer surfaces and module lookup),
:mod:`.propagate` (layer-by-layer propagation), :mod:`.physics` (multiple scattering,
hadronic interactions), :mod:`.cells` (clusters and centroids), :mod:`.noise`,
:mod:`.event` (one event's four tables), :mod:`.runner` (many events to disk).
"""

from trkx.data.simulate.event import SimulationConfig, simulate_event
from trkx.data.simulate.particles import generate_particles, load_particles
from trkx.data.simulate.physics import PhysicsConfig
from trkx.data.simulate.runner import plan_jobs, run_jobs

__all__ = ["PhysicsConfig", "SimulationConfig", "generate_particles", "load_particles",
           "plan_jobs", "run_jobs", "simulate_event"]
