"""The ``--material`` comparison of benchmarks/sim_vs_real.py, and the simulated twins it
shares with the distributions: what the material does to a track on the real sample event
beside its simulated twins (trkx.realism.material)."""

from __future__ import annotations

import harness
import numpy as np
import pandas as pd
from model_gaps import FIRST_SIM_ID, SAMPLE_EVENT

from trkx.data.simulate import generate_particles, simulate_event
from trkx.data.simulate.event import SimulationConfig
from trkx.data.simulate.physics import PhysicsConfig
from trkx.data.simulate.runner import event_rng
from trkx.realism.material import crossing_kicks, material_between_crossings, material_facts
from trkx.tracks.evaluate.projection import read_tables

PILEUP = 200.0


def simulate(n_events: int, seed: int, sigma_z: float, physics: PhysicsConfig | None = None
             ) -> list[dict[str, pd.DataFrame]]:
    """``n_events`` pile-up-200 events, event ``FIRST_SIM_ID + i`` drawn as ``trkx simulate
    --seed SEED --vertex-sigma-z SIGMA_Z`` (and the ``physics`` options) draws it."""
    config = SimulationConfig(physics=physics or PhysicsConfig())
    events = []
    for i in range(n_events):
        rng = event_rng(seed, FIRST_SIM_ID + i)
        events.append(simulate_event(generate_particles(PILEUP, rng, sigma_z), rng, config))
    return events


def material(args) -> int:
    """The ``--material`` comparison: printed and written to ``--json``."""
    physics = PhysicsConfig(field_map=args.field_map, support_fraction=args.support_fraction,
                            energy_loss=args.energy_loss)
    sample = read_tables(args.data / SAMPLE_EVENT, "truth", cells=False)
    real = material_facts(sample["hits"], sample["particles"], sample["truth"])
    events = simulate(args.events, args.seed, args.vertex_sigma_z, physics)
    twins = [material_facts(e["hits"], e["particles"], e["truth"]) for e in events]
    sim = {key: float(np.median([t[key] for t in twins]))
           for key in ("pixel_circle_rms_um", "pt_loss")}
    sim["particles"] = int(sum(t["particles"] for t in twins))
    out = {"physics": {"field_map": args.field_map, "support_fraction": args.support_fraction,
                       "energy_loss": args.energy_loss},
           "events": args.events, "seed": args.seed, "real_sample": real, "simulated": sim}
    kicks = [crossing_kicks(e["hits"], e["particles"], e["truth"], field_map=field_map)
             for e, field_map in ((sample, "solenoid"), *((e, args.field_map) for e in events))]
    table = material_between_crossings(kicks[0]).merge(
        material_between_crossings(pd.concat(kicks[1:])), how="left",
        on=["same_layer", "group", "next_group"], suffixes=("", "_simulated"))
    out["between_crossings"] = table.to_dict(orient="records")
    harness.write_json(args.json, out)
    print(f"{'prompt 1-2 GeV':24s} {'pixel circle RMS':>17s} {'pT lost':>8s} {'particles':>9s}")
    for name, facts in (("real sample event", real), ("simulated", sim)):
        print(f"{name:24s} {facts['pixel_circle_rms_um']:14.2f} um {facts['pt_loss']:8.4f} "
              f"{facts['particles']:9d}")
    print("material from a crossing to the next (x / X0 at normal incidence):")
    print(table[["same_layer", "group", "next_group", "pairs", "x0_normal", "x0_normal_across",
                 "x0_normal_simulated", "x0_normal_across_simulated"]].to_string(
        index=False, float_format="%.4f"))
    return 0
