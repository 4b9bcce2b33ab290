"""``trkx info PREFIX``: what an event holds (hits, cells, particles, noise, hits per volume)."""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "info", help="summarise one TrackML event",
        description="Print the hits, cells, particles, noise fraction and hits per detector "
                    "volume of one event. PREFIX is the path without '-hits.csv[.gz]', e.g. "
                    "data/event000001000.")
    parser.add_argument("prefix", metavar="PREFIX", help="event prefix, e.g. dir/event000001000")
    parser.set_defaults(func=run)


def available_parts(prefix: str) -> list[str]:
    """The parts of an event that exist on disk (hits must)."""
    from trkx.data.io import find_part_file
    from trkx.data.schema import PARTS
    from trkx.files.errors import EventFileNotFoundError

    parts = []
    for part in PARTS:
        try:
            find_part_file(prefix, part)
            parts.append(part)
        except EventFileNotFoundError:
            if part == "hits":
                raise
    return parts


def run(args: argparse.Namespace) -> int:
    from trkx.data.io import event_id_from_prefix, load_event
    from trkx.data.summary import event_summary, format_summary

    parts = available_parts(args.prefix)
    frames = dict(zip(parts, load_event(args.prefix, parts)))
    event_id = event_id_from_prefix(args.prefix)
    lines = format_summary(event_summary(event_id, **frames)).splitlines()
    if "truth" in frames and "particles" in frames:     # after the particles line
        at = next(i for i, line in enumerate(lines) if line.startswith("  particles")) + 1
        lines.insert(at, f"  signal particles    {signal_particles(event_id, frames):>9,d}  "
                         "(trkx's count: pT >= 1 GeV, >= 3 hits on >= 3 layers)")
    print("\n".join(lines))
    return 0


def signal_particles(event_id: int, frames: dict) -> int:
    """The signal particles of an event by trkx's count (trkx.tracks.evaluate.metrics)."""
    from trkx.tracks.evaluate.event_truth import truth_from_frames
    from trkx.tracks.evaluate.metrics import MetricCuts

    truth = truth_from_frames(event_id, frames["hits"], frames["particles"], frames["truth"])
    _, rows, n_layers = truth.particles
    return int(MetricCuts().signal(truth.pt[rows], truth.eta[rows], truth.nhits[rows],
                                   n_layers).sum())
