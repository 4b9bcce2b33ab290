"""``trkx train filter`` and ``trkx infer filter`` (the shape: :mod:`trkx.stages.tools`).

Input events are the embedding stage's records (``*.pt`` with ``edge_index`` and labels).
Config sections, one-to-one onto constructors: ``model`` -> FilterMLP (the network),
``module`` -> FilterModule (its training), ``data`` ->
trkx.training.data.StageData, ``trainer`` -> trkx.training.TrainerOptions, ``inference`` ->
trkx.filter.checkpoint.FilterInference; ``checkpoint``: the model file.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trkx.data.record_type import Record
    from trkx.training.fit import FitResult

NAME = "filter"
SECTIONS = ("model", "module", "data", "trainer", "inference", "checkpoint")
DEFAULT_CONFIG = "configs/filter.yaml"


def check_config(config: dict[str, Any], label: str) -> None:
    from trkx.config import check_keys, instantiate, section
    from trkx.filter.checkpoint import FilterInference
    from trkx.filter.model import FilterMLP
    from trkx.filter.module import FilterModule
    from trkx.training import TrainerOptions
    from trkx.training.data import StageData

    check_keys(FilterMLP, section(config, "model", label), f"{label}: model")
    check_keys(FilterModule, section(config, "module", label), f"{label}: module",
               provided=("model",))
    instantiate(StageData, section(config, "data", label), f"{label}: data")
    instantiate(TrainerOptions, section(config, "trainer", label), f"{label}: trainer")
    instantiate(FilterInference, section(config, "inference", label), f"{label}: inference")


def count_events(folder: str) -> int:
    from trkx.data.listing import record_paths

    return len(record_paths(folder, allow_empty=True))


def check_edges(records: list[Record], folder: str, key: str, labels: bool = True) -> None:
    """The filter trains (and runs) on the embedding stage's (labelled) graphs."""
    from trkx.data.record import EDGE_INDEX, EDGE_LABELS
    from trkx.files.errors import TrackMLFormatError

    keys = (EDGE_INDEX, *EDGE_LABELS) if labels else (EDGE_INDEX,)
    for record in records:
        missing = [k for k in keys if getattr(record, k, None) is None]
        if missing:
            raise TrackMLFormatError(
                f"{folder}: event {int(record.event_id)} has no {', '.join(missing)}: the "
                f"filter needs the embedding stage's records ({key} = a `trkx infer "
                "embedding` output folder)")


def train(config: dict[str, Any], label: str, checkpoint: Path) -> FitResult:
    from trkx.config import ConfigError, instantiate, section
    from trkx.data.events import load_records
    from trkx.filter.model import FilterMLP
    from trkx.filter.module import FilterModule
    from trkx.stages.tools import fit_on_records, load_split
    from trkx.training import TrainerOptions
    from trkx.training.data import StageData

    data = instantiate(StageData, section(config, "data", label), f"{label}: data")
    options = instantiate(TrainerOptions, section(config, "trainer", label), f"{label}: trainer")
    train_records, val_records = load_split(data, count_events, label, load_records,
                                            check_edges)
    model, module = section(config, "model", label), section(config, "module", label)
    teacher = module.get("teacher")
    if teacher is not None and not Path(str(teacher)).is_file():   # before the run folder
        raise ConfigError(f"{label}: module.teacher {teacher}: no such model file")

    def build() -> FilterModule:
        network = instantiate(FilterMLP, model, f"{label}: model")
        return instantiate(FilterModule, {**module, "model": network}, f"{label}: module")

    def default_point(trained: FilterModule) -> dict[str, float]:
        cut = trained.hparams.get("score_cut")
        return {} if cut is None else {"score_cut": float(cut)}

    return fit_on_records(
        NAME, build, model, train_records, val_records, options=options,
        checkpoint=checkpoint, config=config, efficiency_key="val_signal_efficiency",
        default_working_point=default_point)


def infer(config: dict[str, Any], label: str, checkpoint: Path, events: Path, out: Path,
          n_events: int | None) -> int:
    from trkx.config import ConfigError, instantiate, section
    from trkx.data.events import iter_records
    from trkx.filter.checkpoint import FilterInference, load_model
    from trkx.filter.inference import apply_cut, score_edges
    from trkx.filter.module import filter_metrics
    from trkx.stages.tools import write_records

    options = instantiate(FilterInference, section(config, "inference", label),
                          f"{label}: inference")
    network, stored = load_model(checkpoint)
    try:
        cut = options.cut(stored)
    except ValueError as exc:
        raise ConfigError(f"{label}: {exc}") from exc
    records = iter_records(events, n_events)      # one event in memory at a time
    scores: dict[int, Any] = {}

    def transform(record: Record) -> Record:
        check_edges([record], str(events), "--events", labels=False)
        scores[id(record)] = score_edges(network, record, options.chunk_size,
                                         options.precision)
        return apply_cut(record, scores[id(record)], cut)

    def describe(record: Record, result: Record) -> str:
        line = f"{record.edge_index.shape[1]:,d} -> {result.edge_index.shape[1]:,d} edges"
        record_scores = scores.pop(id(record))
        if getattr(record, "signal", None) is None:
            return line
        m = filter_metrics(record, record_scores, cut)
        return line + (f", signal efficiency {m['signal_efficiency']:.4f}, fake rejection "
                       f"{m['fake_rejection']:.4f}, purity {m['purity']:.4f}")

    write_records(records, out, transform, describe)
    return 0
