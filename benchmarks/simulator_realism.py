"""How real do simulated events look? Replay real particle tables and compare with real hits.

For every event with both a real particle table (``kaggle_particles``) and a real hit file
(``kaggle_hits``), the event's own particles are simulated through the TrackML detector and:

* each particle's simulated hit count is compared with its real ``nhits``
  (``d = sim - real``): share with ``|d| <= 1``, median ``d``, mean ``|d|``, for particles with
  pT > 1 GeV and for all particles with ``nhits > 0``;
* the hits per (volume, layer) are compared with the real hit file: total-variation distance
  ``TVD = 1/2 sum_l |p_sim(l) - p_real(l)|`` of the shares, and ``(N_sim - N_real) / N_real``.

Then ``--generated`` events from the built-in generator at mu = 200 are compared with the
averages of the real tables (particles, hits, noise share = 1 - sum(nhits) / hits, hits per
pT > 1 GeV particle), and the time of one mu = 200 event on one core is measured as the CPU
time of the (single-threaded) process, which the sharing of the machine does not inflate.

    python benchmarks/simulator_realism.py [--data DIR] [--generated 3] [--json out.json]
"""

from __future__ import annotations

if __name__ == "__main__":   # trkx's allocator, before torch loads (trkx/allocator.py)
    from trkx.allocator import setup as setup_allocator

    setup_allocator()

import argparse
import dataclasses
import json
import os
import sys
import time
from pathlib import Path

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")   # "one CPU core"

import numpy as np
import pandas as pd

from trkx.data.simulate import (
    PhysicsConfig,
    SimulationConfig,
    generate_particles,
    load_particles,
    simulate_event,
)
from trkx.data.simulate.particles import interaction_points
from trkx.data.simulate.runner import event_rng

EVENTS = (1001, 1003, 1005, 1009, 1010, 1012, 1013)


def default_data_dir() -> Path:
    env = os.environ.get("TRKX_DATA")
    return Path(env) if env else Path(__file__).resolve().parents[2] / "shared" / "data" / "trackml"


def hit_count_figures(sim: np.ndarray, real: np.ndarray, pt: np.ndarray) -> dict[str, float]:
    """Per-particle agreement of simulated and real hit counts."""
    diff = sim.astype(np.int64) - real.astype(np.int64)
    out = {}
    for name, mask in (("pt1", pt > 1.0), ("all", real > 0)):
        d = diff[mask]
        out[f"frac_within1_{name}"] = float(np.mean(np.abs(d) <= 1))
        out[f"median_diff_{name}"] = float(np.median(d))
        out[f"mean_abs_diff_{name}"] = float(np.mean(np.abs(d)))
        out[f"mean_diff_{name}"] = float(np.mean(d))
    return out


def layer_figures(sim_hits: pd.DataFrame, real_hits: pd.DataFrame) -> dict[str, float]:
    """TVD of the (volume, layer) shares and relative difference of the totals."""
    keys = ["volume_id", "layer_id"]
    a = sim_hits.groupby(keys).size()
    b = real_hits.groupby(keys).size()
    table = pd.DataFrame({"sim": a, "real": b}).fillna(0.0)
    tvd = 0.5 * np.abs(table["sim"] / table["sim"].sum() - table["real"] / table["real"].sum())
    return {"layer_tvd": float(tvd.sum()),
            "total_hits_rel_diff": float(len(sim_hits) / len(real_hits) - 1.0)}


def replay(data: Path, event_id: int, seed: int, config: SimulationConfig) -> dict[str, float]:
    name = f"event{event_id:09d}"
    particles_file = next((data / "kaggle_particles").glob(f"{name}-particles.csv*"))
    real_particles = pd.read_csv(particles_file)
    real_hits = pd.read_csv(next((data / "kaggle_hits").glob(f"{name}-hits.csv*")))
    start = time.process_time()
    particles = load_particles(particles_file)
    out = simulate_event(particles, event_rng(seed, event_id), config,
                         end_points=interaction_points(particles))
    seconds = time.process_time() - start
    pt = np.hypot(real_particles["px"], real_particles["py"]).to_numpy()
    figures = hit_count_figures(out["particles"]["nhits"].to_numpy(),
                                real_particles["nhits"].to_numpy(), pt)
    figures.update(layer_figures(out["hits"], real_hits))
    figures.update(event_id=event_id, cpu_seconds=seconds, sim_hits=len(out["hits"]),
                   real_hits=len(real_hits))
    return figures


def real_averages(data: Path) -> dict[str, float]:
    """Averages of the real mu = 200 events, over every real particle table.

    particles: table length; noise share: ``1 - sum(nhits) / hits`` on the events that also
    have a hit file; hits: ``sum(nhits) / (1 - noise share)`` per table (so that hits and
    particles describe the same events); hits per particle: mean ``nhits`` of pT > 1 GeV
    particles with hits.
    """
    tables = {int(f.name[5:14]): pd.read_csv(f)
              for f in sorted((data / "kaggle_particles").glob("event*-particles.csv*"))}
    noise, hits_with_file = [], []
    for f in sorted((data / "kaggle_hits").glob("event*-hits.csv*")):
        eid = int(f.name[5:14])
        if eid in tables:
            n = len(pd.read_csv(f, usecols=["hit_id"]))
            hits_with_file.append(n)
            noise.append(1.0 - tables[eid]["nhits"].sum() / n)
    noise_share = float(np.mean(noise))
    per_particle = []
    for table in tables.values():
        pt = np.hypot(table["px"], table["py"])
        per_particle.append(table["nhits"][(pt > 1) & (table["nhits"] > 0)].mean())
    return {"particles": float(np.mean([len(t) for t in tables.values()])),
            "hits": float(np.mean([t["nhits"].sum() for t in tables.values()])
                          / (1.0 - noise_share)),
            "hits_in_hit_files": float(np.mean(hits_with_file)),
            "noise_share": noise_share,
            "hits_per_particle_pt1": float(np.mean(per_particle))}


def generated(n_events: int, seed: int, config: SimulationConfig) -> dict[str, float]:
    rows, seconds, wall = [], [], []
    for i in range(n_events):
        rng = event_rng(seed, 10_000 + i)
        start, start_wall = time.process_time(), time.perf_counter()
        particles = generate_particles(200.0, rng)
        out = simulate_event(particles, rng, config)
        seconds.append(time.process_time() - start)
        wall.append(time.perf_counter() - start_wall)
        truth, p = out["truth"], out["particles"]
        pt = np.hypot(p["px"], p["py"])
        rows.append({"particles": len(p), "hits": len(out["hits"]),
                     "noise_share": float((truth["particle_id"] == 0).mean()),
                     "hits_per_particle_pt1": float(p["nhits"][(pt > 1) & (p["nhits"] > 0)]
                                                    .mean())})
    figures = {k: float(np.mean([r[k] for r in rows])) for k in rows[0]}
    figures["seconds_per_event_mu200"] = float(np.median(seconds))
    figures["wall_seconds_per_event_mu200"] = float(np.median(wall))
    return figures


def physics_config(overrides: list[str]) -> PhysicsConfig:
    """A PhysicsConfig with ``KEY=VALUE`` overrides (values cast to the field's type)."""
    defaults = PhysicsConfig()
    values = {}
    for item in overrides:
        key, _, value = item.partition("=")
        if not hasattr(defaults, key):
            raise SystemExit(f"unknown physics key {key!r}")
        kind = type(getattr(defaults, key))
        values[key] = value.lower() in ("1", "true", "yes") if kind is bool else kind(value)
    return dataclasses.replace(defaults, **values)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=default_data_dir())
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--events", type=int, nargs="*", default=list(EVENTS))
    parser.add_argument("--generated", type=int, default=3, help="generated mu=200 events")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    parser.add_argument("--physics", nargs="*", default=[], metavar="KEY=VALUE",
                        help="override PhysicsConfig fields, e.g. hadronic_scale=2")
    parser.add_argument("--noise", type=float, default=None, help="noise share override")
    args = parser.parse_args(argv)
    if not (args.data / "kaggle_particles").is_dir():
        print(f"no real TrackML data at {args.data} (set TRKX_DATA)", file=sys.stderr)
        return 2
    config = SimulationConfig(physics=physics_config(args.physics))
    if args.noise is not None:
        config = dataclasses.replace(config, noise_fraction=args.noise)
    per_event = [replay(args.data, eid, args.seed, config) for eid in args.events]
    keys = [k for k in per_event[0] if k not in ("event_id",)]
    average = {k: float(np.mean([e[k] for e in per_event])) for k in keys}
    real = real_averages(args.data)
    gen = generated(args.generated, args.seed, config) if args.generated > 0 else {}

    print("per event (replayed real particle tables)")
    cols = ["frac_within1_pt1", "median_diff_pt1", "mean_abs_diff_pt1", "frac_within1_all",
            "layer_tvd", "total_hits_rel_diff", "sim_hits", "real_hits", "cpu_seconds"]
    print("event  " + "  ".join(f"{c:>20s}" for c in cols))
    for e in per_event + [dict(average, event_id="mean")]:
        print(f"{e['event_id']!s:>5s}  " + "  ".join(f"{e[c]:>20.4g}" for c in cols))
    if gen:
        print("\ngenerated mu=200 events vs real averages")
        for key in ("particles", "hits", "noise_share", "hits_per_particle_pt1"):
            print(f"  {key:<24s} sim {gen[key]:>10.4g}  real {real[key]:>10.4g}  "
                  f"rel diff {gen[key] / real[key] - 1:+.3f}")
        print(f"  CPU seconds per mu=200 event (one thread): {gen['seconds_per_event_mu200']:.2f}"
              f" (wall {gen['wall_seconds_per_event_mu200']:.2f} on the shared machine)")
    figures = {k: average[k] for k in ("frac_within1_pt1", "median_diff_pt1",
                                       "mean_abs_diff_pt1", "mean_diff_pt1", "frac_within1_all",
                                       "median_diff_all", "mean_abs_diff_all", "layer_tvd",
                                       "total_hits_rel_diff")}
    figures["median_diff_pt1"] = float(np.median([e["median_diff_pt1"] for e in per_event]))
    figures["seconds_per_event_replay"] = average["cpu_seconds"]
    if gen:
        figures["seconds_per_event_mu200"] = gen["seconds_per_event_mu200"]
        figures["wall_seconds_per_event_mu200"] = gen["wall_seconds_per_event_mu200"]
        for key in ("particles", "hits", "noise_share", "hits_per_particle_pt1"):
            figures[f"generated_{key}"] = gen[key]
            figures[f"real_{key}"] = real[key]
            figures[f"generated_{key}_rel_diff"] = gen[key] / real[key] - 1.0
    figures["per_event"] = per_event
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
