"""Event graph records as GNN input: a dataset of record files with clear errors on bad ones."""

from __future__ import annotations

from pathlib import Path

import torch
from torch.utils.data import Dataset

from trkx.data.record import EDGE_INDEX, SIGNAL, X, Y, check_record, load_record
from trkx.data.record_type import Record
from trkx.files.errors import TrackMLFormatError

TRAINING_KEYS: tuple[str, ...] = (X, EDGE_INDEX, Y, SIGNAL)
INFERENCE_KEYS: tuple[str, ...] = (X, EDGE_INDEX)


def check_graph_record(data: Record, where: str, keys: tuple[str, ...] = TRAINING_KEYS) -> None:
    """Raise :class:`TrackMLFormatError` naming ``where`` and the key when ``data`` cannot be
    scored: a key of ``keys`` missing, or a field against the record contract
    (:func:`trkx.data.record.check_record`: dtypes, shapes, edge ids inside the node range)."""
    for key in keys:
        if getattr(data, key, None) is None:
            raise TrackMLFormatError(f"{where}: record has no {key!r} (needs {', '.join(keys)};"
                                     " run the filter stage first)")
    check_record(data, where)


class GraphRecordDataset(Dataset):
    """Event records read from files on access (one event per item), checked for ``keys``."""

    def __init__(self, paths: list[Path], keys: tuple[str, ...] = TRAINING_KEYS) -> None:
        self.paths = list(paths)
        self.keys = keys

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> Record:
        path = self.paths[index]
        data = load_record(path)
        check_graph_record(data, str(path), self.keys)
        data.x = data.x.float()
        data.edge_index = data.edge_index.long()
        for key in self.keys[2:]:
            setattr(data, key, getattr(data, key).bool())
        return data


def single_event(batch: list[Record]) -> Record:
    """DataLoader ``collate_fn``: events are whole graphs, one per step."""
    if len(batch) != 1:
        raise ValueError("GNN training uses one event per step (batch_size 1)")
    return batch[0]


def node_features_of(path: Path) -> int:
    """Columns of ``x`` in one record (fills ``model.node_features`` when the config omits it)."""
    data = load_record(path)
    check_graph_record(data, str(path), INFERENCE_KEYS)
    return int(torch.as_tensor(data.x).shape[1])
