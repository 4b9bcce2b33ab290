"""Event records for training and inference: from TrackML CSV events or saved records.

A folder is read either as TrackML events (``event*-hits.csv[.gz]`` ...; records are built
with trkx.data.record) or as saved event records (``*.pt`` written by save_record).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytorch_lightning as pl
from torch.utils.data import DataLoader
from torch_geometric.data import Data
from tqdm import tqdm

from trkx.data.io import list_event_prefixes
from trkx.data.record import build_event_record, load_record
from trkx.data.truth import SignalCuts


def record_files(path: str | os.PathLike) -> list[Path]:
    return sorted(Path(path).glob("*.pt"))


def event_prefixes(path: str | os.PathLike) -> list[str]:
    return list_event_prefixes(str(p) for p in sorted(Path(path).iterdir()))


def load_records(path: str | os.PathLike, nevents: int | None = None, skip: int = 0,
                 use_cells: bool = False, signal_pt_min: float = SignalCuts.pt_min,
                 desc: str = "events") -> list[Data]:
    """Records of the events in ``path`` (TrackML CSV events or ``*.pt`` records)."""
    from trkx.data.detector import load_detector

    path = Path(path)
    if not path.is_dir():
        raise FileNotFoundError(f"{path}: no such events folder")
    saved = record_files(path)
    if saved:
        chosen = saved[skip:None if nevents is None else skip + nevents]
        return [load_record(p) for p in tqdm(chosen, desc=desc, leave=False)]
    prefixes = event_prefixes(path)
    if not prefixes:
        raise FileNotFoundError(f"{path}: holds neither TrackML events (event*-hits.csv) nor "
                                "event records (*.pt)")
    chosen = prefixes[skip:None if nevents is None else skip + nevents]
    detector = load_detector()
    records = []
    for prefix in tqdm(chosen, desc=desc, leave=False):
        records.append(event_record(prefix, detector, use_cells, signal_pt_min))
    return records


def event_record(prefix: str, detector, use_cells: bool, signal_pt_min: float,
                 with_truth: bool = True) -> Data:
    """The record of one TrackML event (cells only read when ``use_cells``; particles and
    truth when they exist and ``with_truth``: inference needs neither)."""
    from trkx.data.errors import EventFileNotFoundError
    from trkx.data.io import event_id_from_prefix, find_part_file, load_event

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


class EventRecords(pl.LightningDataModule):
    """Train and validation events (config section ``data``): the first ``train_events`` and
    the next ``val_events`` of ``events``, or validation from ``val_events_dir`` when given."""

    def __init__(self, events: str, train_events: int = 8, val_events: int = 1,
                 use_cells: bool = False, signal_pt_min: float = SignalCuts.pt_min,
                 val_events_dir: str | None = None) -> None:
        super().__init__()
        self.events, self.use_cells, self.signal_pt_min = events, use_cells, signal_pt_min
        self.val_events_dir = val_events_dir
        self.train_events, self.val_events = train_events, val_events
        self.train_records: list[Data] = []
        self.val_records: list[Data] = []

    def setup(self, stage: str | None = None) -> None:
        if self.train_records:
            return
        options = {"use_cells": self.use_cells, "signal_pt_min": self.signal_pt_min}
        if self.val_events_dir is not None:
            self.train_records = load_records(self.events, self.train_events, **options)
            self.val_records = load_records(self.val_events_dir, self.val_events, **options)
            for folder, records, wanted in [(self.events, self.train_records, self.train_events),
                                            (self.val_events_dir, self.val_records,
                                             self.val_events)]:
                if len(records) < wanted:
                    raise ValueError(f"{folder}: {len(records)} events, {wanted} wanted")
            return
        records = load_records(self.events, self.train_events + self.val_events, **options)
        if len(records) < self.train_events + self.val_events:
            raise ValueError(f"{self.events}: {len(records)} events, but train_events + "
                             f"val_events = {self.train_events + self.val_events}")
        self.train_records = records[:self.train_events]
        self.val_records = records[self.train_events:]

    def train_dataloader(self) -> DataLoader:
        return DataLoader(self.train_records, batch_size=None, shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return DataLoader(self.val_records, batch_size=None)
