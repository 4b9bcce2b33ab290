"""``trkx partition --events DIR -P 4 8 16 64``: choose a partitioner, algorithm and P.

For every world size and partitioner prints, averaged over the event records of ``DIR``
(filter-stage records with ``pos`` and ``edge_index``), the edge balance and the analytic
communication volume of each distributed algorithm (:mod:`trkx.gnn.distributed.figures`). No
process is started: the figures are computed from the partitions.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

DEFAULT_PARTITIONERS = ("sector", "balanced", "refined", "metis")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "partition", help="edge balance and halo volumes of the distributed partitioners",
        description="Print, for each world size P and partitioner, max/mean edges per rank "
                    "and the bytes each distributed algorithm moves per GNN iteration, from "
                    "the analytic volumes (no processes are started).")
    parser.add_argument("--events", required=True, metavar="DIR",
                        help="folder of event records with pos and edge_index")
    parser.add_argument("-P", "--world-sizes", type=int, nargs="+", default=[4, 8, 16, 64],
                        metavar="P", help="world sizes (default 4 8 16 64)")
    parser.add_argument("--partitioners", nargs="+", default=list(DEFAULT_PARTITIONERS),
                        help=f"default: {' '.join(DEFAULT_PARTITIONERS)} (metis when pymetis "
                             "is installed)")
    parser.add_argument("--width", type=int, default=128,
                        help="feature columns per exchange (the model's hidden width)")
    parser.add_argument("--pattern", default="*.pt", help="record file glob (default *.pt)")
    parser.add_argument("--n-events", type=int, default=None, help="use the first N records")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.set_defaults(func=run)


def _partitioners(names: list[str]) -> list[str]:
    from trkx.config import ConfigError
    from trkx.gnn.distributed import PARTITIONERS
    unknown = [n for n in names if n not in PARTITIONERS]
    if unknown:
        raise ConfigError(f"--partitioners: unknown {', '.join(unknown)}; choose from "
                          f"{', '.join(PARTITIONERS)}")
    if "metis" in names and list(names) == list(DEFAULT_PARTITIONERS):
        try:
            import pymetis  # noqa: F401
        except ImportError:
            print("(metis left out: pip install pymetis to include it)")
            return [n for n in names if n != "metis"]
    return list(names)


def format_table(table: dict) -> str:
    """One line per (P, partitioner): balance, halo and MB per GNN iteration per algorithm."""
    seen = {a for by_part in table.values() for row in by_part.values() for a in row["bytes"]}
    algorithms = sorted(seen, key=lambda a: (a != "sparse-1d", a != "oblivious-1d", a))
    head = (f"{'P':>4} {'partitioner':11} {'edges max/mean':>14} {'halo rows':>10} "
            + " ".join(f"{a + ' MB':>18}" for a in algorithms))
    lines = [head, "-" * len(head)]
    for P, by_part in table.items():
        for name, row in by_part.items():
            cells = " ".join(
                f"{row['bytes'][a]['total'] / 1e6:9.2f} ({row['bytes'][a]['max_rank'] / 1e6:6.2f})"
                if a in row["bytes"] else f"{'-':>18}" for a in algorithms)
            lines.append(f"{P:>4} {name:11} {row['edge_imbalance']:14.3f} "
                         f"{row['halo_rows']:10.0f} {cells}")
    lines.append("MB: bytes received in one GNN iteration (gather + aggregate, forward + "
                 "backward) summed over ranks (busiest rank); fp32, averaged over events")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from trkx.config import ConfigError
    from trkx.data.listing import record_paths
    from trkx.data.record import load_record
    from trkx.files.atomic import atomic_write
    from trkx.files.errors import TrackMLFormatError
    from trkx.gnn.distributed.figures import mean_figures, partition_figures

    if any(P < 1 for P in args.world_sizes):
        raise ConfigError(f"-P: world sizes must be >= 1, got {args.world_sizes}")
    names = _partitioners(args.partitioners)
    paths = record_paths(args.events, args.pattern)[:args.n_events]
    rows: dict[int, dict[str, list[dict]]] = {P: {n: [] for n in names}
                                              for P in args.world_sizes}
    for path in paths:
        data = load_record(path)
        for key in ("pos", "edge_index"):
            if key not in data:
                raise TrackMLFormatError(f"{path}: record has no '{key}' (partitioning needs "
                                         "hit positions and a graph: filter-stage records)")
        for P in args.world_sizes:
            for name in names:
                try:
                    rows[P][name].append(partition_figures(
                        data.edge_index, data.pos, data.num_nodes, P, name, args.width))
                except ValueError as exc:
                    raise ConfigError(f"{path}: P={P}, {name}: {exc}") from exc
    table = {P: {n: mean_figures(r) for n, r in by_part.items()} for P, by_part in rows.items()}
    print(f"{len(paths)} event(s) from {args.events}")
    print(format_table(table))
    if args.json:
        text = json.dumps({str(P): v for P, v in table.items()}, indent=2)
        atomic_write(args.json, lambda tmp: tmp.write_text(text))
        print(f"wrote {args.json}")
    return 0
