"""Simulate and write many events: per-event seeding, optional worker processes, progress bar.

Event ``i`` (id ``first_event_id + i``, or the source table's id when replaying) draws from
``numpy.random.default_rng([seed, event_id])``, so every event is reproducible on its own and
the output does not depend on ``workers``.

Luminous region. A generated event's primary vertices are spread by ``N(0, sigma_z)`` along
the beam; given a list ``(s_0, ..., s_{k-1})`` of lengths, event ``id`` takes

    sigma_z(id) = s_{id mod k},

so consecutive ids cycle through the list: any ``k`` consecutive events hold each length
once (a 20-event training set of ``(5.49, 50)`` has 10 of each), and the choice depends on the
event id alone, never on ``workers`` or on which events are simulated together. Replayed
events keep the vertices of their tables.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from trkx.data.io import write_event
from trkx.data.simulate.event import SimulationConfig, simulate_event
from trkx.data.simulate.particles import (
    generate_particles,
    interaction_points,
    load_particles,
    particle_sources,
)
from trkx.runtime.parallel import worker_pool


@dataclass(frozen=True)
class EventJob:
    """One event to simulate: its id, and either a particle file to replay or a pile-up and
    the length ``vertex_sigma_z`` (mm; None: the fitted one) of its luminous region."""

    event_id: int
    seed: int
    mu: float
    particles_file: str | None = None
    vertex_sigma_z: float | None = None


def event_rng(seed: int, event_id: int) -> np.random.Generator:
    """The generator of one event (independent streams per (seed, event id))."""
    return np.random.default_rng([int(seed), int(event_id)])


def event_sigma_z(sigma_z: Sequence[float], event_id: int) -> float:
    """The luminous-region length of event ``event_id``: ``sigma_z[event_id mod k]``."""
    return float(sigma_z[int(event_id) % len(sigma_z)])


def plan_jobs(n_events: int | None, seed: int, mu: float = 200.0, first_event_id: int = 1000,
              particles_from: str | os.PathLike | None = None,
              vertex_sigma_z: Sequence[float] | None = None) -> list[EventJob]:
    """The events to simulate; replayed events keep their source's event id (and their
    vertices: ``vertex_sigma_z``, one or more lengths in mm cycled over the event ids, is for
    generated events only)."""
    if vertex_sigma_z is not None:
        vertex_sigma_z = [float(s) for s in vertex_sigma_z]
        if not vertex_sigma_z or not all(np.isfinite(s) and s > 0 for s in vertex_sigma_z):
            raise ValueError(f"vertex sigma_z must be one or more positive lengths in mm, got "
                             f"{vertex_sigma_z}")
        if particles_from is not None:
            raise ValueError("the vertex sigma_z is for generated events; replayed particle "
                             "tables keep their own vertices")
    if particles_from is not None:
        sources = particle_sources(particles_from)
        if n_events is not None:
            if n_events > len(sources):
                raise ValueError(f"--events {n_events} but {particles_from} holds only "
                                 f"{len(sources)} particle table(s)")
            sources = sources[:n_events]
        return [EventJob(eid, seed, mu, str(f)) for eid, f in sources]
    if n_events is None or n_events < 0:
        raise ValueError("the number of events must be given and >= 0")
    ids = [first_event_id + i for i in range(n_events)]
    return [EventJob(eid, seed, mu, vertex_sigma_z=None if vertex_sigma_z is None
                     else event_sigma_z(vertex_sigma_z, eid)) for eid in ids]


def run_job(job: EventJob, out_dir: str | os.PathLike,
            config: SimulationConfig | None = None) -> Path:
    """Simulate one event and write ``out_dir/eventNNNNNNNNN-*.csv.gz``; returns the prefix."""
    rng = event_rng(job.seed, job.event_id)
    end_points = None
    if job.particles_file is not None:
        particles = load_particles(job.particles_file)
        end_points = interaction_points(particles)
    else:
        particles = generate_particles(job.mu, rng, job.vertex_sigma_z)
    tables = simulate_event(particles, rng, config, end_points=end_points)
    prefix = Path(out_dir) / f"event{job.event_id:09d}"
    write_event(prefix, **tables)
    return prefix


def _run_job_star(args: tuple) -> Path:
    return run_job(*args)


def run_jobs(jobs: list[EventJob], out_dir: str | os.PathLike, workers: int = 1,
             config: SimulationConfig | None = None) -> Iterator[Path]:
    """Run ``jobs`` (in ``workers`` processes when > 1), yielding prefixes as events finish."""
    if workers <= 1:
        for job in jobs:
            yield run_job(job, out_dir, config)
        return
    with worker_pool(workers) as pool:  # Ctrl-C or an abandoned generator stops it at once
        yield from pool.map(_run_job_star, [(job, out_dir, config) for job in jobs])
