"""``trkx simulate``: write simulated TrackML events (hits, cells, particles, truth)."""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "simulate", help="simulate TrackML events on the real detector geometry",
        description="Simulate complete TrackML events (hits, cells, particles, truth) with a "
                    "helix propagator through the TrackML detector. Particles come from the "
                    "built-in generator (fitted to real TrackML tables; --pileup scales it) or "
                    "from real particle tables (--particles-from), whose event and particle ids "
                    "are kept. Writes OUT/eventNNNNNNNNN-{hits,cells,particles,truth}.csv.gz.")
    parser.add_argument("--out", required=True, metavar="DIR", help="output folder")
    parser.add_argument("--n-events", type=int, default=None, metavar="N",
                        help="number of events (default with --particles-from: all tables)")
    parser.add_argument("--seed", type=int, default=0, metavar="S", help="random seed")
    parser.add_argument("--pileup", type=float, default=200.0, metavar="MU",
                        help="mean pile-up of generated events (default 200, like TrackML)")
    parser.add_argument("--first-event-id", type=int, default=1000, metavar="ID",
                        help="event id of the first generated event (default 1000)")
    parser.add_argument("--particles-from", default=None, metavar="PATH",
                        help="replay real particle tables: a file or a folder of "
                             "event*-particles.csv[.gz]")
    parser.add_argument("--noise", type=float, default=0.17, metavar="F",
                        help="share of noise hits (default 0.17)")
    parser.add_argument("--workers", type=int, default=1, metavar="N",
                        help="parallel worker processes (default 1)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from trkx.config import ConfigError
    from trkx.data.simulate.event import SimulationConfig
    from trkx.data.simulate.runner import plan_jobs, run_jobs

    if args.particles_from is None and args.n_events is None:
        raise ConfigError("--n-events N is required without --particles-from")
    if args.pileup <= 0:
        raise ConfigError(f"--pileup must be > 0, got {args.pileup}")
    if not 0.0 <= args.noise < 1.0:
        raise ConfigError(f"--noise must be in [0, 1), got {args.noise}")
    try:
        jobs = plan_jobs(args.n_events, args.seed, args.pileup, args.first_event_id,
                         args.particles_from)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    config = SimulationConfig(noise_fraction=args.noise)
    for _ in tqdm(run_jobs(jobs, args.out, max(1, args.workers), config), total=len(jobs),
                  desc="simulate", unit="event"):
        pass
    print(f"wrote {len(jobs)} event(s) to {args.out}")
    return 0
