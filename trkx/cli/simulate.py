"""``trkx simulate``: write simulated TrackML events (hits, cells, particles, truth)."""

from __future__ import annotations

import argparse
import math


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
    parser.add_argument("--vertex-sigma-z", default=None, metavar="MM[,MM...]",
                        help="Gaussian spread (mm) of the primary vertices along the beam, the "
                             "length of the luminous region (default 5.49, fitted to the Kaggle "
                             "training events; the later release of the challenge data, e.g. "
                             "the sample event, has ~50). A list such as 5.49,50 covers both: "
                             "event ID takes the (ID mod length)-th value, so consecutive events "
                             "cycle through the list whatever --workers is")
    parser.add_argument("--field-map", choices=("uniform", "solenoid"), default="uniform",
                        help="the magnetic field: uniform 2 T (default), or solenoid: 2 T at the "
                             "centre, falling off along the beam as the real events' field does "
                             "(1.85 T at |z| = 900 mm, 1.0 T at 1,924 mm; fitted to the real "
                             "sample event)")
    parser.add_argument("--support-fraction", type=float, default=1.0, metavar="F",
                        help="material per module crossing beside the silicon, as a fraction of "
                             "it (default 1; 5.9 with --energy-loss is the fit to the real "
                             "sample event's tracks: it scatters as much as real tracks do)")
    parser.add_argument("--energy-loss", type=float, default=0.0, metavar="MEV_PER_MM",
                        help="mean energy lost per mm of the material crossed, taken off each "
                             "particle's momentum (default 0: none; 1.2 with --support-fraction "
                             "5.9 is the fit: real 1-2 GeV tracks lose ~0.8%% of their pT "
                             "across the detector)")
    parser.add_argument("--noise", type=float, default=0.17, metavar="F",
                        help="share of noise hits (default 0.17)")
    parser.add_argument("--workers", type=int, default=1, metavar="N",
                        help="parallel worker processes (default 1)")
    parser.set_defaults(func=run)


def parse_lengths(text: str | None, option: str) -> list[float] | None:
    """``"5.49,50"`` -> ``[5.49, 50.0]`` (positive, finite); a bad list is a ConfigError
    naming ``option``."""
    import math

    from trkx.config import ConfigError

    if text is None:
        return None
    try:
        values = [float(item) for item in text.split(",")]
    except ValueError:
        values = []
    if not values or not all(math.isfinite(v) and v > 0 for v in values):
        raise ConfigError(f"{option} must be one or more positive lengths in mm separated by "
                          f"commas (e.g. 50 or 5.49,50), got {text!r}")
    return values


def run(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from trkx.config import ConfigError
    from trkx.data.simulate.event import SimulationConfig
    from trkx.data.simulate.physics import PhysicsConfig
    from trkx.data.simulate.runner import plan_jobs, run_jobs

    if args.particles_from is None and args.n_events is None:
        raise ConfigError("--n-events N is required without --particles-from")
    if args.pileup <= 0:
        raise ConfigError(f"--pileup must be > 0, got {args.pileup}")
    if not 0.0 <= args.noise < 1.0:
        raise ConfigError(f"--noise must be in [0, 1), got {args.noise}")
    sigma_z = parse_lengths(args.vertex_sigma_z, "--vertex-sigma-z")
    if sigma_z is not None and args.particles_from is not None:
        raise ConfigError("--vertex-sigma-z is for generated events; --particles-from replays "
                          "the tables' own vertices")
    try:
        jobs = plan_jobs(args.n_events, args.seed, args.pileup, args.first_event_id,
                         args.particles_from, sigma_z)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    if not (math.isfinite(args.support_fraction) and args.support_fraction >= 0):
        raise ConfigError(f"--support-fraction must be >= 0, got {args.support_fraction}")
    if not (math.isfinite(args.energy_loss) and args.energy_loss >= 0):
        raise ConfigError(f"--energy-loss must be >= 0 MeV/mm, got {args.energy_loss}")
    config = SimulationConfig(physics=PhysicsConfig(field_map=args.field_map,
                                                    support_fraction=args.support_fraction,
                                                    energy_loss=args.energy_loss),
                              noise_fraction=args.noise)
    for _ in tqdm(run_jobs(jobs, args.out, max(1, args.workers), config), total=len(jobs),
                  desc="simulate", unit="event"):
        pass
    print(f"wrote {len(jobs)} event(s) to {args.out}")
    return 0
