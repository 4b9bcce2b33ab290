"""Simulate and write many events: per-event seeding, optional worker processes, progress bar.

Event ``i`` (id ``first_event_id + i``, or the source table's id when replaying) draws from
``numpy.random.default_rng([seed, event_id])``, so every event is reproducible on its own and
the output does not depend on ``workers``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
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
from trkx.parallel import worker_pool


@dataclass(frozen=True)
class EventJob:
    """One event to simulate: its id, and either a particle file to replay or a pile-up."""

    event_id: int
    seed: int
    mu: float
    particles_file: str | None = None


def event_rng(seed: int, event_id: int) -> np.random.Generator:
    """The generator of one event (independent streams per (seed, event id))."""
    return np.random.default_rng([int(seed), int(event_id)])


def plan_jobs(n_events: int | None, seed: int, mu: float = 200.0, first_event_id: int = 1000,
              particles_from: str | os.PathLike | None = None) -> list[EventJob]:
    """The events to simulate; replayed events keep their source's event id."""
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
    return [EventJob(first_event_id + i, seed, mu) for i in range(n_events)]


def run_job(job: EventJob, out_dir: str | os.PathLike,
            config: SimulationConfig | None = None) -> Path:
    """Simulate one event and write ``out_dir/eventNNNNNNNNN-*.csv.gz``; returns the prefix."""
    rng = event_rng(job.seed, job.event_id)
    end_points = None
    if job.particles_file is not None:
        particles = load_particles(job.particles_file)
        end_points = interaction_points(particles)
    else:
        particles = generate_particles(job.mu, rng)
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
