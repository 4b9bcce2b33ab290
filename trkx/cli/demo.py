"""``trkx demo``: the most complete job that exists, on the real TrackML sample event.

Until the learned pipeline lands this summarises the event, builds its features and truth
graph, and scores three submissions: the truth itself, the truth with 5% of hits moved to
random tracks, and the connected components of the truth graph (the tracks a perfect edge
classifier would give).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "demo", help="run the demonstration on the real TrackML sample event",
        description="Summarise, featurise and score the TrackML sample event. The event is "
                    "--event, else $TRKX_DATA/sample_event/event000000001.")
    parser.add_argument("--event", metavar="PREFIX", default=None,
                        help="event prefix (default: $TRKX_DATA/sample_event/event000000001)")
    parser.add_argument("--seed", type=int, default=0)
    parser.set_defaults(func=run)


def default_event() -> str:
    data = os.environ.get("TRKX_DATA")
    if not data:
        raise FileNotFoundError("no event given: pass --event PREFIX or set TRKX_DATA to a "
                                "folder holding sample_event/event000000001-*.csv.gz")
    return str(Path(data) / "sample_event" / "event000000001")


def run(args: argparse.Namespace) -> int:
    import numpy as np
    import pandas as pd
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    from trkx.data.detector import load_detector
    from trkx.data.io import event_id_from_prefix, load_event
    from trkx.data.record import build_event_record
    from trkx.data.summary import event_summary, format_summary
    from trkx.data.truth import SignalCuts
    from trkx.tracks.evaluate.score import score_event

    cuts = SignalCuts()
    prefix = args.event or default_event()
    start = time.perf_counter()
    hits, cells, particles, truth = load_event(prefix)
    print(format_summary(event_summary(event_id_from_prefix(prefix), hits, cells, particles,
                                       truth)))
    record = build_event_record(hits, cells, particles, truth, detector=load_detector())
    n_signal = int(np.unique(record.particle_id[record.signal_hit].numpy()).size)
    print(f"\nfeatures: {', '.join(record.feature_names)}")
    print(f"truth graph: {record.track_edges.shape[1]:,d} edges; "
          f"{n_signal} signal particles (pT >= {cuts.pt_min:g} GeV, >= {cuts.min_hits} hits)")

    rng = np.random.default_rng(args.seed)
    perfect = pd.DataFrame({"hit_id": truth["hit_id"], "track_id": truth["particle_id"]})
    noisy = perfect.copy()
    moved = rng.random(len(noisy)) < 0.05
    noisy.loc[moved, "track_id"] = rng.integers(0, len(noisy), int(moved.sum()))
    n = record.num_nodes
    edges = record.track_edges.numpy()
    graph = coo_matrix((np.ones(edges.shape[1]), (edges[0], edges[1])), shape=(n, n))
    _, component = connected_components(graph, directed=False)
    components = pd.DataFrame({"hit_id": hits["hit_id"], "track_id": component})
    print("\nTrackML score")
    for name, submission in [("truth as tracks", perfect), ("5% of hits moved", noisy),
                             ("truth-graph components", components)]:
        print(f"  {name:<24s} {score_event(truth, submission):.4f}")
    print(f"\ndone in {time.perf_counter() - start:.2f} s")
    return 0
