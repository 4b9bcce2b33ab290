"""What the edge filter keeps at a given graph size: efficiency against edges per hit.

    python benchmarks/filter_budget.py --checkpoints A/filter.pt [B/filter.pt ...] \
        --records runs/pu200/graphs/test/embedding [--events 2] [--budgets 2,3,5,8] [--json PATH]

For each filter and each budget b of kept edges per hit (over all the events together), the
cut c_b is the score above which N_hits * b edges survive, and reported are

    efficiency_y(b)      = |{e : y_e, s_e >= c_b}| / |{e : y_e}|            (true edges received)
    efficiency_signal(b) = the same over the signal edges (both hits of a pT > 1 GeV particle)

with the signal efficiency of every event's embedding graph (``received``) beside them, so the
filter's figure (issue 30: >= 0.99 of received at <= 3 edges/hit) reads off directly. The records
are the embedding stage's (``trkx infer embedding``) of events not used in training.
"""

from __future__ import annotations

if __name__ == "__main__":   # trkx's allocator, before torch loads (trkx/allocator.py)
    from trkx.allocator import setup as setup_allocator

    setup_allocator()

import argparse
import json
import sys
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def budget_curve(scores: torch.Tensor, y: torch.Tensor, signal: torch.Tensor, hits: int,
                 budgets: list[float]) -> list[dict[str, float]]:
    """Efficiencies at each budget of edges per hit (module docstring)."""
    order = torch.argsort(scores, descending=True)
    y_sorted, signal_sorted = y[order].double(), signal[order].double()
    y_kept, signal_kept = torch.cumsum(y_sorted, 0), torch.cumsum(signal_sorted, 0)
    rows = []
    for budget in budgets:
        kept = min(round(budget * hits), len(order))
        index = max(kept - 1, 0)
        rows.append({"edges_per_hit": budget,
                     "cut": float(scores[order[index]]) if kept else 1.0,
                     "efficiency_y": float(y_kept[index] / y_sorted.sum()) if kept else 0.0,
                     "efficiency_signal": (float(signal_kept[index] / signal_sorted.sum())
                                           if kept else 0.0)})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoints", nargs="+", required=True, help="filter checkpoints")
    parser.add_argument("--records", required=True, help="folder of embedding-stage records")
    parser.add_argument("--events", type=int, default=2, help="first N records (default 2)")
    parser.add_argument("--budgets", default="2,3,5,8", help="edges per hit, comma-separated")
    parser.add_argument("--json", default=None, help="write the figures here")
    args = parser.parse_args(argv)

    from trkx.data.listing import record_paths
    from trkx.data.record import load_record
    from trkx.filter.checkpoint import load_model
    from trkx.filter.inference import score_edges

    budgets = [float(b) for b in args.budgets.split(",")]
    paths = record_paths(Path(args.records))[:args.events]
    if not paths:
        print(f"error: {args.records}: no event records", file=sys.stderr)
        return 2
    records = [load_record(path) for path in paths]
    hits = sum(int(r.num_nodes) for r in records)
    edges = sum(r.edge_index.shape[1] for r in records)
    y = torch.cat([r.y.bool() for r in records])
    signal = torch.cat([r.signal.bool() for r in records])
    print(f"{len(records)} events, {hits} hits, embedding graph {edges / hits:.2f} edges/hit, "
          f"{int(y.sum())} true and {int(signal.sum())} signal edges received")
    results = {"records": [str(p) for p in paths], "hits": hits, "edges": edges, "filters": {}}
    for checkpoint in args.checkpoints:
        network, _ = load_model(checkpoint)
        scores = torch.cat([score_edges(network, record) for record in records])
        rows = budget_curve(scores, y, signal, hits, budgets)
        results["filters"][checkpoint] = rows
        print(checkpoint)
        for row in rows:
            print(f"  {row['edges_per_hit']:5.1f} edges/hit: cut {row['cut']:.4f}  efficiency "
                  f"of received: true edges {row['efficiency_y']:.4f}, signal "
                  f"{row['efficiency_signal']:.4f}")
    if args.json:
        from trkx.atomic import atomic_write

        text = json.dumps(results, indent=2) + "\n"
        atomic_write(Path(args.json), lambda tmp: tmp.write_text(text))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
