"""Event records for training and inference: from TrackML CSV events or saved records.

A folder is read either as TrackML events (``event*-hits.csv[.gz]`` ...; records are built
with trkx.data.record) or as saved event records (``*.pt`` written by save_record); what a
folder holds is listed by :mod:`trkx.data.listing`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from tqdm import tqdm

from trkx.data.detector import Detector
from trkx.data.listing import event_prefixes, record_paths
from trkx.data.record import build_event_record, load_record
from trkx.data.record_type import Record
from trkx.data.truth import SignalCuts


def load_records(path: str | os.PathLike, nevents: int | None = None, skip: int = 0,
                 use_cells: bool = False, signal_pt_min: float = SignalCuts.pt_min,
                 desc: str = "events") -> list[Record]:
    """Records of the events in ``path`` (TrackML CSV events or ``*.pt`` records), all in
    memory (training reads its events once); :func:`iter_records` reads one at a time."""
    return list(iter_records(path, nevents, skip, use_cells, signal_pt_min, desc))


def iter_records(path: str | os.PathLike, nevents: int | None = None, skip: int = 0,
                 use_cells: bool = False, signal_pt_min: float = SignalCuts.pt_min,
                 desc: str = "events") -> Iterator[Record]:
    """The records of :func:`load_records`, read one by one as they are consumed, so that a
    stage's inference holds one event at a time (an embedding graph of a pile-up-200 event
    with cells is ~150 MB: 100 of them in memory took 16 GB). The folder is checked when the
    iterator is made, before the first record is read."""
    from trkx.data.detector import load_detector

    path = Path(path)
    if not path.is_dir():
        raise FileNotFoundError(f"{path}: no such events folder")
    saved = record_paths(path, allow_empty=True)
    if saved:
        chosen = saved[skip:None if nevents is None else skip + nevents]
        return (load_record(p) for p in tqdm(chosen, desc=desc, leave=False))
    prefixes = event_prefixes(path)
    if not prefixes:
        raise FileNotFoundError(f"{path}: holds neither TrackML events (event*-hits.csv) nor "
                                "event records (*.pt)")
    chosen = prefixes[skip:None if nevents is None else skip + nevents]
    detector = load_detector()
    return (event_record(prefix, detector, use_cells, signal_pt_min)
            for prefix in tqdm(chosen, desc=desc, leave=False))


def event_record(prefix: str, detector: Detector, use_cells: bool, signal_pt_min: float,
                 with_truth: bool = True) -> Record:
    """The record of one TrackML event (cells only read when ``use_cells``; particles and
    truth when they exist and ``with_truth``: inference needs neither)."""
    from trkx.data.io import event_id_from_prefix, find_part_file, load_event
    from trkx.files.errors import EventFileNotFoundError

    parts = ["hits", "particles", "truth"] if with_truth else ["hits"]
    try:
        find_part_file(prefix, "truth")
    except EventFileNotFoundError:
        parts = ["hits"]
    if use_cells:
        parts.append("cells")
    frames = dict(zip(parts, load_event(prefix, parts, detector=detector)))
    return build_event_record(frames["hits"], frames.get("cells"), frames.get("particles"),
                              frames.get("truth"), detector=detector, use_cells=use_cells,
                              signal_cuts=SignalCuts(pt_min=signal_pt_min),
                              event_id=event_id_from_prefix(prefix))

