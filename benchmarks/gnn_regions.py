"""Where the GNN keeps the signal: edge efficiency and fakes per kept signal edge, by region.

    python benchmarks/gnn_regions.py --records L/NAME/graphs_test/gnn [--cuts 0.5,0.8] [--json PATH]

The records are the GNN stage's of test events (``trkx infer ... --graphs G`` writes them to
``G/gnn``). For each event, each region (barrel: both hits in volumes 8, 13 or 17; endcap: the
other edges) and each cut c on the GNN score s,

    keep(c)          = |{e in region : signal_e, s_e > c}| / |{e in region : signal_e}|
    fakes_per_kept(c) = |{e in region : not y_e, s_e > c}| / |{e in region : signal_e, s_e > c}|

with signal edges those between two hits of one pT > 1 GeV particle and y the true edges. The
barrel of a wide luminous region (sigma_z 50 mm, the odd event ids of `trkx simulate
--vertex-sigma-z 5.49,50`) is where a GNN that sees single edges loses (docs/levers.md).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from trkx.data.simulate.geometry import BARREL_VOLUMES


def region_figures(edge_index: np.ndarray, scores: np.ndarray, signal: np.ndarray,
                   true: np.ndarray, volume: np.ndarray, cuts: list[float]) -> dict[str, dict]:
    """``{region: {cut: {keep, fakes_per_kept, signal_edges}}}`` of one event (module docstring)."""
    barrel_hit = np.isin(volume, sorted(BARREL_VOLUMES))
    barrel = barrel_hit[edge_index[0]] & barrel_hit[edge_index[1]]
    figures: dict[str, dict] = {}
    for region, mask in (("barrel", barrel), ("endcap", ~barrel)):
        n_signal = int((mask & signal).sum())
        rows = {}
        for cut in cuts:
            kept = mask & (scores > cut)
            kept_signal = int((kept & signal).sum())
            rows[f"{cut:g}"] = {"keep": kept_signal / max(n_signal, 1),
                                "fakes_per_kept": int((kept & ~true).sum()) / max(kept_signal, 1),
                                "signal_edges": n_signal}
        figures[region] = rows
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=Path, required=True,
                        help="folder of GNN-stage records (trkx infer --graphs G: G/gnn)")
    parser.add_argument("--cuts", default="0.5,0.8", help="GNN score cuts, comma-separated")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    from trkx.atomic import atomic_write
    from trkx.data.errors import TrackMLFormatError
    from trkx.data.record import load_record

    try:
        cuts = [float(c) for c in args.cuts.split(",")]
    except ValueError:
        print(f"--cuts: not a comma-separated list of numbers: {args.cuts!r}", file=sys.stderr)
        return 2
    paths = sorted(args.records.glob("*.pt")) if args.records.is_dir() else []
    if not paths:
        print(f"--records {args.records}: no record files (*.pt)", file=sys.stderr)
        return 2
    results = {}
    for path in paths:
        try:
            record = load_record(path)
        except TrackMLFormatError as error:
            print(error, file=sys.stderr)
            return 2
        missing = [k for k in ("scores", "signal", "y", "volume_id") if k not in record]
        if missing:
            print(f"{path}: record has no {missing[0]!r} (a GNN-stage record of a simulated "
                  "event is needed)", file=sys.stderr)
            return 2
        figures = region_figures(record.edge_index.numpy(), record.scores.numpy(),
                                 record.signal.numpy().astype(bool),
                                 record.y.numpy().astype(bool), record.volume_id.numpy(), cuts)
        results[path.stem] = figures
        cells = [f"{region} keep@{cut} {row['keep']:.3f} fakes/kept {row['fakes_per_kept']:.2f}"
                 for region, rows in figures.items() for cut, row in rows.items()]
        print(f"{path.stem}: " + " | ".join(cells))
    if args.json:
        atomic_write(args.json, lambda tmp: tmp.write_text(json.dumps(results, indent=1)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
