"""``trkx score SUBMISSION.csv PREFIX``: the TrackML score of a submission for one event."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "score", help="TrackML score of a submission",
        description="Score a submission (columns hit_id,track_id or event_id,hit_id,track_id) "
                    "against the truth of event PREFIX. The score is printed on the last line.")
    parser.add_argument("submission", metavar="SUBMISSION.csv")
    parser.add_argument("prefix", metavar="PREFIX", help="event prefix, e.g. dir/event000001000")
    parser.set_defaults(func=run)


def read_submission(path: str, event_id: int) -> pd.DataFrame:
    """The rows of a submission file for ``event_id`` (all rows when it has no event_id)."""
    import numpy as np
    import pandas as pd

    from trkx.files.errors import EventFileNotFoundError, TrackMLFormatError

    try:
        table = pd.read_csv(path)
    except FileNotFoundError as exc:
        raise EventFileNotFoundError(f"{path}: no such submission file") from exc
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise TrackMLFormatError(f"{path}: not a readable CSV file ({exc})") from exc
    if "event_id" in table.columns:
        events = pd.to_numeric(table["event_id"], errors="coerce")
        if events.isna().any():
            row = int(np.flatnonzero(events.isna().to_numpy())[0])
            raise TrackMLFormatError(f"{path}: bad event_id {table['event_id'].iloc[row]!r} "
                                     f"at line {row + 2}")
        table = table[events.to_numpy() == event_id]
        if table.empty:
            present = sorted(set(events.astype(int)))[:5]
            raise TrackMLFormatError(f"{path}: no rows for event {event_id} "
                                     f"(event ids present: {present})")
    return table


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    import numpy as np

    from trkx.data.io import event_id_from_prefix, load_event
    from trkx.files.errors import EventFileNotFoundError
    from trkx.tracks.evaluate.score import match_tracks

    if not Path(args.submission).is_file():      # the file the user made, named first
        raise EventFileNotFoundError(f"{args.submission}: no such submission file")
    try:
        (truth,) = load_event(args.prefix, ["truth"], detector=None)
    except EventFileNotFoundError as exc:
        if any(Path(f"{args.prefix}-truth-pixel.csv{gz}").is_file() for gz in ("", ".gz")):
            raise EventFileNotFoundError(
                f"{args.prefix}: truth for its pixel hits only (-truth-pixel.csv), no TrackML "
                "score; `trkx infer` scores such an event on its pixel hits") from exc
        raise
    event_id = event_id_from_prefix(args.prefix)
    submission = read_submission(args.submission, event_id)
    match = match_tracks(truth, submission)
    good = match.good
    total = float(truth["weight"].to_numpy(np.float64).sum())
    credited = float(match.major_weight[good].sum())
    candidates = int((match.n_hits >= 3).sum())
    print(f"event {event_id}: {len(submission):,d} submitted hits of {len(truth):,d}, "
          f"{len(match.track_id):,d} track ids ({candidates:,d} tracks of >= 3 hits; a hit left "
          f"alone is an id of its own), {int(good.sum()):,d} credited")
    print(f"credited truth weight {credited:.9f} of {total:.9f}")
    print(f"score {credited / total if total > 0 else 0.0:.9f}")
    return 0
