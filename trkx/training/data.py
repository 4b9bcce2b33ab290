"""The ``data:`` section shared by the three stages: which events train, which validate.

    data.train_dir     folder of training events (TrackML CSV events for the embedding, event
                       records ``*.pt`` for every stage)
    data.val_dir       folder of validation events (null: the events after the training events
                       of train_dir)
    data.train_events  how many events of train_dir train (null: all, less the validation ones)
    data.val_events    how many events validate (null: all of val_dir; 1 when split from
                       train_dir; 0: no validation)

:func:`split_events` turns these into (folder, first, count) slices and fails with a line naming
the keys when a folder holds too few events.
"""

from __future__ import annotations

from dataclasses import dataclass

from trkx.config import ConfigError
from trkx.data.truth import SignalCuts


@dataclass(frozen=True)
class StageData:
    """Config section ``data`` (see the module docstring)."""

    train_dir: str | None = None
    val_dir: str | None = None
    train_events: int | None = None
    val_events: int | None = None

    def __post_init__(self) -> None:
        for name in ("train_events", "val_events"):
            value = getattr(self, name)
            if value is not None and value < (1 if name == "train_events" else 0):
                raise ValueError(f"{name} must be >= {1 if name == 'train_events' else 0} or "
                                 f"null, got {value}")


@dataclass(frozen=True)
class EmbeddingData(StageData):
    """The embedding's ``data`` section: :class:`StageData` plus how records are built from
    TrackML events (cluster-shape features from cells; the signal pT cut of the labels)."""

    use_cells: bool = False
    signal_pt_min: float = SignalCuts.pt_min


@dataclass(frozen=True)
class EventSlice:
    folder: str
    first: int
    count: int


def split_events(data: StageData, count_events, label: str,
                 ) -> tuple[EventSlice, EventSlice | None]:
    """(train slice, validation slice or None); ``count_events(folder) -> int``."""
    if not data.train_dir:
        raise ConfigError(f"{label}: data.train_dir is not set (set it, or --set "
                          "data.train_dir=DIR)")
    available = count_events(data.train_dir)
    if data.val_dir:
        n_val = count_events(data.val_dir) if data.val_events is None else data.val_events
        n_train = available if data.train_events is None else data.train_events
        val_available = count_events(data.val_dir)
        if n_val > val_available:
            raise ConfigError(f"{label}: data.val_events={n_val} but {data.val_dir} holds "
                              f"{val_available} event(s); lower data.val_events")
        val = EventSlice(data.val_dir, 0, n_val) if n_val else None
    else:
        n_val = 1 if data.val_events is None else data.val_events
        n_train = available - n_val if data.train_events is None else data.train_events
        val = EventSlice(data.train_dir, n_train, n_val) if n_val else None
    if n_train < 1 or n_train + (0 if data.val_dir else n_val) > available:
        wanted = (f"data.train_events={n_train}" if data.val_dir else
                  f"data.train_events + data.val_events = {n_train + n_val}")
        raise ConfigError(f"{label}: {wanted} but {data.train_dir} holds {available} "
                          "event(s); lower the counts, add events or set data.val_dir")
    return EventSlice(data.train_dir, 0, n_train), val
