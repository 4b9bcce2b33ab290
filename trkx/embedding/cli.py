"""``trkx train embedding`` and ``trkx infer embedding`` (the shape: :mod:`trkx.stages.tools`).

Config sections, one-to-one onto constructors: ``model`` -> EmbeddingMLP (the network),
``module`` -> EmbeddingModule (its training), ``data`` ->
trkx.training.data.EmbeddingData, ``trainer`` -> trkx.training.TrainerOptions, ``inference`` ->
trkx.embedding.inference.EmbeddingInference (null values: the checkpoint's working point);
``checkpoint``: the model file.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trkx.data.record_type import Record
    from trkx.training.data import EventSlice
    from trkx.training.fit import FitResult

NAME = "embedding"
SECTIONS = ("model", "module", "data", "trainer", "inference", "checkpoint")
DEFAULT_CONFIG = "configs/embedding.yaml"


def check_config(config: dict[str, Any], label: str) -> None:
    """Every key and value type of every section, before any work."""
    from trkx.config import check_keys, instantiate, section
    from trkx.embedding.inference import EmbeddingInference
    from trkx.embedding.model import EmbeddingMLP
    from trkx.embedding.module import EmbeddingModule
    from trkx.training import TrainerOptions
    from trkx.training.data import EmbeddingData

    check_keys(EmbeddingMLP, section(config, "model", label), f"{label}: model")
    check_keys(EmbeddingModule, section(config, "module", label), f"{label}: module",
               provided=("model",))
    instantiate(EmbeddingData, section(config, "data", label), f"{label}: data")
    instantiate(TrainerOptions, section(config, "trainer", label), f"{label}: trainer")
    instantiate(EmbeddingInference, section(config, "inference", label), f"{label}: inference")


def count_events(folder: str) -> int:
    """Event records (``*.pt``) in ``folder``, else TrackML events."""
    from trkx.data.listing import event_prefixes, record_paths

    if not Path(folder).is_dir():
        raise FileNotFoundError(f"{folder}: no such events folder")
    return len(record_paths(folder, allow_empty=True)) or len(event_prefixes(folder))


def train(config: dict[str, Any], label: str, checkpoint: Path) -> FitResult:
    import functools

    from trkx.config import instantiate, section
    from trkx.data.events import load_records
    from trkx.embedding.model import EmbeddingMLP
    from trkx.embedding.module import EmbeddingModule
    from trkx.stages.tools import fit_on_records, load_split
    from trkx.training import TrainerOptions
    from trkx.training.data import EmbeddingData

    data = instantiate(EmbeddingData, section(config, "data", label), f"{label}: data")
    options = instantiate(TrainerOptions, section(config, "trainer", label), f"{label}: trainer")
    load = functools.partial(load_records, use_cells=data.use_cells,
                             signal_pt_min=data.signal_pt_min)
    train_records, val_records = load_split(
        data, count_events, label, load, check_record_truth,
        functools.partial(check_training_events, use_cells=data.use_cells))
    model, module = section(config, "model", label), section(config, "module", label)

    def build() -> EmbeddingModule:
        network = instantiate(EmbeddingMLP, model, f"{label}: model")
        return instantiate(EmbeddingModule, {**module, "model": network}, f"{label}: module")

    return fit_on_records(
        NAME, build, model, train_records, val_records, options=options,
        checkpoint=checkpoint, config=config, efficiency_key="val_edge_efficiency",
        default_working_point=lambda m: {"radius": m.hparams.radius,
                                         "max_neighbours": m.hparams.max_neighbours})


def check_training_events(part: EventSlice, key: str, use_cells: bool) -> None:
    """The TrackML events of a training/validation slice have truth and particles (the
    labels), and cells when the model uses cell features; checked before any is read."""
    from trkx.data.folders import require_parts
    from trkx.data.listing import event_prefixes, record_paths

    if record_paths(part.folder, allow_empty=True):   # saved records: check_record_truth once read
        return
    prefixes = event_prefixes(part.folder)[part.first:part.first + part.count]
    require_parts(prefixes, ("truth", "particles"), "training needs", key,
                  "train on events with truth (e.g. `trkx simulate`), or run a trained model "
                  "on these with `trkx infer`")
    if use_cells:
        require_parts(prefixes, ("cells",), "data.use_cells: true needs", key,
                      "give events with cells or --set data.use_cells=false "
                      "--set model.in_features=3")


def check_record_truth(records: list[Record], folder: str, key: str) -> None:
    """Saved records train only when they carry the truth of their hits (records written by
    `trkx infer embedding` from events without truth do not)."""
    from trkx.data.record import EDGE_TRUTH_SOURCES
    from trkx.files.errors import TrackMLFormatError

    for record in records:
        missing = [k for k in EDGE_TRUTH_SOURCES if getattr(record, k, None) is None]
        if missing:
            raise TrackMLFormatError(
                f"training needs truth: {folder}: event {int(record.event_id)} has no "
                f"{', '.join(missing)} ({key}; records of events without truth cannot train)")


def check_cells(events: Path, use_cells: bool, checkpoint: Path) -> None:
    """A model trained with cell features needs events with cells (or records with them)."""
    from trkx.data.listing import event_prefixes, record_paths

    if not use_cells or record_paths(events, allow_empty=True):
        return
    for prefix in event_prefixes(events):
        if not list(Path(prefix).parent.glob(f"{Path(prefix).name}-cells.csv*")):
            raise FileNotFoundError(
                f"{prefix}-cells.csv[.gz]: missing, but {checkpoint} was trained with cell "
                "features (data.use_cells: true); give events with cells or a model trained "
                "with --set data.use_cells=false")


def infer(config: dict[str, Any], label: str, checkpoint: Path, events: Path, out: Path,
          n_events: int | None) -> int:
    from trkx.config import instantiate, section
    from trkx.data.events import iter_records
    from trkx.embedding.checkpoint import load_model
    from trkx.embedding.inference import EmbeddingInference, embedding_graph
    from trkx.embedding.labels import graph_metrics
    from trkx.files.errors import TrackMLFormatError
    from trkx.stages.tools import write_records
    from trkx.training.data import EmbeddingData

    network, stored = load_model(checkpoint)
    options = instantiate(EmbeddingInference, section(config, "inference", label),
                          f"{label}: inference")
    trained = instantiate(EmbeddingData, stored.config.get("data") or {}, f"{checkpoint}: data")
    here = instantiate(EmbeddingData, section(config, "data", label), f"{label}: data")
    check_cells(events, trained.use_cells, checkpoint)
    # Records keep every feature the model was trained with (the filter uses cell features).
    # One event in memory at a time (trkx.data.events.iter_records).
    records = iter_records(events, n_events, use_cells=trained.use_cells,
                           signal_pt_min=here.signal_pt_min)
    needed = int(stored.constructor["in_features"])

    def checked(record: Record) -> Record:
        if record.x.shape[1] < needed:
            raise TrackMLFormatError(f"{events}: event {int(record.event_id)} has "
                                     f"{record.x.shape[1]} hit features, {checkpoint} needs "
                                     f"{needed} (cell features: use_cells)")
        return record

    radius, k = options.working_point(stored.working_point)

    def describe(_: Record, out_record: Record) -> str:
        line = f"{out_record.edge_index.shape[1]:,d} edges"
        if getattr(out_record, "signal", None) is not None:
            m = graph_metrics(out_record)
            line += (f", efficiency {m['edge_efficiency']:.4f}, purity {m['purity']:.4f}, "
                     f"{m['edges_per_hit']:.1f} edges/hit")
        return line

    write_records(records, out, lambda r: embedding_graph(
        network, checked(r), radius, k, options.backend, options.precision,
        other_layers_only=options.other_layers_only), describe)
    return 0
