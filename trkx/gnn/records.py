"""Event graph records as GNN input: a dataset of record files with clear errors on bad ones."""

from __future__ import annotations

import os
from pathlib import Path

import torch
from torch.utils.data import Dataset
from torch_geometric.data import Data

from trkx.data.errors import TrackMLFormatError
from trkx.data.record import EDGE_INDEX, SIGNAL, X, Y, load_record

TRAINING_KEYS: tuple[str, ...] = (X, EDGE_INDEX, Y, SIGNAL)
INFERENCE_KEYS: tuple[str, ...] = (X, EDGE_INDEX)


def check_graph_record(data: Data, where: str, keys: tuple[str, ...] = TRAINING_KEYS) -> None:
    """Raise :class:`TrackMLFormatError` naming ``where`` and the key when ``data`` cannot be
    scored (missing keys, wrong shapes, edge ids outside the node range)."""
    for key in keys:
        if getattr(data, key, None) is None:
            raise TrackMLFormatError(f"{where}: record has no {key!r} (needs {', '.join(keys)};"
                                     " run the filter stage first)")
    x, edge_index = data.x, data.edge_index
    if x.dim() != 2:
        raise TrackMLFormatError(f"{where}: 'x' must be [N, F], got {tuple(x.shape)}")
    if edge_index.dim() != 2 or edge_index.shape[0] != 2 or edge_index.is_floating_point():
        raise TrackMLFormatError(f"{where}: 'edge_index' must be an integer [2, E] tensor, got "
                                 f"{edge_index.dtype} {tuple(edge_index.shape)}")
    if edge_index.numel() and (int(edge_index.min()) < 0 or int(edge_index.max()) >= len(x)):
        raise TrackMLFormatError(f"{where}: 'edge_index' refers to nodes outside [0, {len(x)})")
    for key in keys[2:]:
        value = getattr(data, key)
        if value.shape != (edge_index.shape[1],):
            raise TrackMLFormatError(f"{where}: {key!r} must have one entry per edge "
                                     f"({edge_index.shape[1]}), got {tuple(value.shape)}")


def record_paths(folder: str | os.PathLike, pattern: str = "*.pt") -> list[Path]:
    """Sorted record files in ``folder``; an error naming the folder when there are none."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder}: no such folder of event records")
    paths = sorted(folder.glob(pattern))
    if not paths:
        raise FileNotFoundError(f"{folder}: no event records matching {pattern!r}")
    return paths


class GraphRecordDataset(Dataset):
    """Event records read from files on access (one event per item), checked for ``keys``."""

    def __init__(self, paths: list[Path], keys: tuple[str, ...] = TRAINING_KEYS) -> None:
        self.paths = list(paths)
        self.keys = keys

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> Data:
        path = self.paths[index]
        data = load_record(path)
        check_graph_record(data, str(path), self.keys)
        data.x = data.x.float()
        data.edge_index = data.edge_index.long()
        for key in self.keys[2:]:
            setattr(data, key, getattr(data, key).bool())
        return data


def single_event(batch: list[Data]) -> Data:
    """DataLoader ``collate_fn``: events are whole graphs, one per step."""
    if len(batch) != 1:
        raise ValueError("GNN training uses one event per step (batch_size 1)")
    return batch[0]


def node_features_of(path: Path) -> int:
    """Columns of ``x`` in one record (fills ``model.node_features`` when the config omits it)."""
    data = load_record(path)
    check_graph_record(data, str(path), INFERENCE_KEYS)
    return int(torch.as_tensor(data.x).shape[1])
