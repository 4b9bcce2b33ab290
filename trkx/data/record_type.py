"""The record type: one event's tensors by name, read and written as attributes.

A :class:`Record` holds what the stages pass between them (``record.x``, ``record.edge_index``,
``record.scores``, ...; the contract is ``trkx.data.record.FIELDS``). It is a plain attribute
store: ``Record(x=..., pos=...)``, ``record.scores = s``, ``getattr(record, name, None)``,
``name in record``, ``record.to_dict()``. A field of the contract that is absent reads as
``None`` (every field but ``x`` is optional); any other absent name raises ``AttributeError``.
``None`` is never stored: assigning it removes the field.

``num_nodes`` is N, the hits of the event: the value set (a record with no hit tensor, as
the track builder's input) or else the rows of ``x`` or ``pos``; ``num_edges`` is E, the columns
of ``edge_index``. ``clone()`` copies every tensor, ``copy.copy`` shares them, ``to(device)``
moves them (what Lightning calls on a batch).

The stages' interface is the attribute access that ``torch_geometric.data.Data`` offers, so a
PyG user reads a record as one; trkx does not import PyG on its inference path (the import
costs more than a second of every command's start-up).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import torch

#: Names that read as ``None`` when absent: the record contract's fields (kept equal to
#: ``trkx.data.record.FIELDS``' names by a test) and the hit features' names.
OPTIONAL_FIELDS: frozenset[str] = frozenset((
    "hit_id", "x", "pos", "volume_id", "layer_id", "event_id", "particle_id", "pt", "eta",
    "nhits", "weight", "production_radius", "vertex_z", "signal_hit", "track_edges",
    "edge_index", "y", "y_pid", "signal", "scores", "feature_names"))


class Record:
    """An event record: named tensors (and the ``feature_names`` list) as attributes."""

    def __init__(self, **fields: Any) -> None:
        for name, value in fields.items():
            setattr(self, name, value)

    def __setattr__(self, name: str, value: Any) -> None:
        if value is None:
            self.__dict__.pop(name, None)
        else:
            self.__dict__[name] = value

    def __getattr__(self, name: str) -> Any:
        # only called when ``name`` is not stored
        if name == "num_nodes":
            for key in ("x", "pos", "hit_id"):
                value = self.__dict__.get(key)
                if isinstance(value, torch.Tensor) and value.dim():
                    return int(value.shape[0])
            return None
        if name == "num_edges":
            edges = self.__dict__.get("edge_index")
            return 0 if edges is None else int(edges.shape[1])
        if name in OPTIONAL_FIELDS:
            return None
        raise AttributeError(f"the record has no field {name!r}")

    def __getitem__(self, name: str) -> Any:
        try:
            return self.__dict__[name]
        except KeyError:
            raise KeyError(f"the record has no field {name!r}") from None

    def __setitem__(self, name: str, value: Any) -> None:
        setattr(self, name, value)

    def __delitem__(self, name: str) -> None:
        del self.__dict__[name]

    def __contains__(self, name: object) -> bool:
        return name in self.__dict__

    def __iter__(self) -> Iterator[tuple[str, Any]]:
        return iter(list(self.__dict__.items()))

    def keys(self) -> list[str]:
        """The names stored (``num_nodes`` among them only when it was set)."""
        return list(self.__dict__)

    def items(self) -> list[tuple[str, Any]]:
        """The stored ``(name, value)`` pairs."""
        return list(self.__dict__.items())

    def to_dict(self) -> dict[str, Any]:
        """A new dict of the stored names and values (the values shared)."""
        return dict(self.__dict__)

    def clone(self) -> Record:
        """A record whose tensors are copies (other values shallow-copied)."""
        return Record(**{name: value.clone() if isinstance(value, torch.Tensor)
                         else copy.copy(value) for name, value in self.__dict__.items()})

    def to(self, device: torch.device | str, non_blocking: bool = False) -> Record:
        """A record with every tensor on ``device`` (tensors already there are shared)."""
        return Record(**{name: value.to(device, non_blocking=non_blocking)
                         if isinstance(value, torch.Tensor) else value
                         for name, value in self.__dict__.items()})

    def cpu(self) -> Record:
        """``to("cpu")``."""
        return self.to("cpu")

    def __repr__(self) -> str:
        parts = [f"{name}={list(value.shape)}" if isinstance(value, torch.Tensor)
                 else f"{name}={value!r}" for name, value in self.__dict__.items()]
        return f"Record({', '.join(parts)})"
