"""Realistic TrackML event simulation on the real detector geometry.

Modules: :mod:`.particles` (generator fitted to real tables, replay, particle-id bit fields),
:mod:`.spectra` and :mod:`.fitted_spectra` (the fit), :mod:`.helix` (helix algebra),
:mod:`.geometry` (layer surfaces and module lookup), :mod:`.propagate` (layer-by-layer
propagation), :mod:`.physics` (multiple scattering, hadronic interactions, measurement rules),
:mod:`.cells` (clusters and centroids), :mod:`.noise`, :mod:`.event` (one event's four tables),
:mod:`.runner` (many events to disk).

The names below are imported lazily, so ``python -m trkx.data.simulate.spectra`` runs cleanly.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "PhysicsConfig": "trkx.data.simulate.physics",
    "SimulationConfig": "trkx.data.simulate.event",
    "simulate_event": "trkx.data.simulate.event",
    "generate_particles": "trkx.data.simulate.particles",
    "load_particles": "trkx.data.simulate.particles",
    "interaction_points": "trkx.data.simulate.particles",
    "plan_jobs": "trkx.data.simulate.runner",
    "run_jobs": "trkx.data.simulate.runner",
}

__all__ = ["PhysicsConfig", "SimulationConfig", "generate_particles", "interaction_points",
           "load_particles", "plan_jobs", "run_jobs", "simulate_event"]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
