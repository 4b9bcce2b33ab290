"""``trkx train gnn`` and ``trkx infer gnn`` (the shape: :mod:`trkx.stages.tools`).

Config (``configs/gnn.yaml``), one section per constructor:

    data:      trkx.training.data.StageData  (train_dir, val_dir, train_events, val_events)
    model:     InteractionGNN    (node_features is read from the records when omitted)
    module:    GNNModule         (everything but ``model``)
    trainer:   trkx.training.TrainerOptions
    inference: trkx.gnn.checkpoint.GNNInference   (graph_ops null: the trained module's)
    checkpoint: the model file

A ``distributed`` section selects graph-parallel training, which runs under ``torchrun``.
Inference adds ``scores`` to every record of ``--events`` and writes them to ``--out``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trkx.data.record_type import Record
    from trkx.training.data import EventSlice
    from trkx.training.fit import FitResult

NAME = "gnn"
SECTIONS = ("data", "model", "module", "trainer", "inference", "checkpoint", "distributed",
            "sampling")
DEFAULT_CONFIG = "configs/gnn.yaml"


def check_config(config: dict[str, Any], label: str) -> None:
    from trkx.config import check_keys, instantiate, section
    from trkx.gnn.checkpoint import GNNInference
    from trkx.gnn.model import InteractionGNN
    from trkx.gnn.module import GNNModule
    from trkx.training import TrainerOptions
    from trkx.training.data import StageData

    if config.get("distributed") is not None:  # graph-parallel: the same sections, + its own
        from trkx.gnn.distributed.train import check_config as check_distributed

        check_distributed(config, label)
    model = section(config, "model", label)
    check_keys(InteractionGNN, model, f"{label}: model", provided=("node_features",))
    check_keys(GNNModule, section(config, "module", label), f"{label}: module",
               provided=("model",))
    instantiate(StageData, section(config, "data", label), f"{label}: data")
    instantiate(TrainerOptions, section(config, "trainer", label), f"{label}: trainer")
    instantiate(GNNInference, section(config, "inference", label), f"{label}: inference")
    if config.get("sampling") is not None:
        from trkx.gnn.sampling.datamodule import SamplingConfig

        instantiate(SamplingConfig, section(config, "sampling", label), f"{label}: sampling")


def count_events(folder: str) -> int:
    from trkx.data.listing import record_paths

    return len(record_paths(folder))


def check_edge_inputs(path: Path, label: str, width: int) -> None:
    """A model with edge inputs needs records the filter scored (``scores``, ``pos``)."""
    from trkx.config import ConfigError
    from trkx.data.record import load_record
    from trkx.gnn.edge_inputs import edge_inputs

    try:
        edge_inputs(load_record(path), str(path), width)
    except ValueError as exc:
        raise ConfigError(f"{exc} (or set model.edge_features=0 in {label})") from exc


def train(config: dict[str, Any], label: str, checkpoint: Path) -> FitResult:
    """Single-process training, or graph-parallel under torchrun when the config has a
    ``distributed`` section (the same driver, the graph_parallel strategy)."""
    from torch.utils.data import DataLoader

    from trkx.config import ConfigError, instantiate, section
    from trkx.data.listing import record_paths
    from trkx.gnn.model import InteractionGNN
    from trkx.gnn.module import GNNModule
    from trkx.gnn.records import GraphRecordDataset, node_features_of, single_event
    from trkx.training import TrainerOptions, fit_stage
    from trkx.training.data import StageData, split_events

    fit = fit_stage
    if config.get("distributed") is not None:
        from trkx.gnn.distributed.train import graph_parallel_fit

        fit = graph_parallel_fit(section(config, "distributed", label), label)
    data = instantiate(StageData, section(config, "data", label), f"{label}: data")
    options = instantiate(TrainerOptions, section(config, "trainer", label), f"{label}: trainer")
    train_slice, val_slice = split_events(data, count_events, label)

    def paths(part: EventSlice) -> list[Path]:
        return record_paths(part.folder)[part.first:part.first + part.count]

    train_paths = paths(train_slice)
    model_config = section(config, "model", label)
    model_config.setdefault("node_features", node_features_of(train_paths[0]))
    if model_config.get("edge_features", 0):
        check_edge_inputs(train_paths[0], label, int(model_config["edge_features"]))
    module_config = section(config, "module", label)
    teacher = module_config.get("teacher")
    if teacher is not None and not Path(str(teacher)).is_file():   # before the run folder
        raise ConfigError(f"{label}: module.teacher {teacher}: no such model file")

    def build() -> GNNModule:
        model = instantiate(InteractionGNN, model_config, f"{label}: model")
        return instantiate(GNNModule, {**module_config, "model": model}, f"{label}: module")

    if config.get("sampling") is not None:  # minibatches of sampled subgraphs
        from trkx.gnn.sampling.datamodule import make_train_loader

        loader = make_train_loader(section(config, "sampling", label), train_paths,
                                   options.seed, label)
    else:
        loader = DataLoader(GraphRecordDataset(train_paths), batch_size=1, shuffle=True,
                            collate_fn=single_event)
    val_loader = (DataLoader(GraphRecordDataset(paths(val_slice)), batch_size=1,
                             collate_fn=single_event) if val_slice else None)
    return fit(NAME, build, network=lambda m: m.model, constructor=lambda m: model_config,
               options=options, checkpoint=checkpoint, config=config,
               train_loader=loader, val_loader=val_loader, efficiency_key="val_efficiency",
               default_working_point=lambda m: {"edge_cut": float(m.edge_cut)})


def infer(config: dict[str, Any], label: str, checkpoint: Path, events: Path, out: Path,
          n_events: int | None) -> int:
    from trkx.config import instantiate, section
    from trkx.data.listing import record_paths
    from trkx.data.record import load_record
    from trkx.files.errors import TrackMLFormatError
    from trkx.gnn.checkpoint import GNNInference, load_model
    from trkx.gnn.edge_inputs import model_edge_inputs
    from trkx.gnn.inference import score_edges
    from trkx.gnn.ops_factory import KernelChooser
    from trkx.gnn.records import INFERENCE_KEYS, check_graph_record
    from trkx.stages.tools import write_records

    options = instantiate(GNNInference, section(config, "inference", label),
                          f"{label}: inference")
    model, stored = load_model(checkpoint)
    graph_ops = options.kernel(stored)
    chooser = KernelChooser(width=model.hidden, backward=False)

    def read(path: Path) -> Record:
        data = load_record(path)
        check_graph_record(data, str(path), INFERENCE_KEYS)
        if data.x.shape[1] < model.node_features:
            raise TrackMLFormatError(f"{path}: 'x' has {data.x.shape[1]} features, the model "
                                     f"reads {model.node_features}")
        return data

    def transform(data: Record) -> Record:
        scored = data.clone()
        scored.scores = score_edges(model, data.x, data.edge_index.long(), graph_ops, chooser,
                                    precision=options.precision,
                                    edge_attr=model_edge_inputs(model, data, label))
        return scored

    names: dict[int, str] = {}

    def records() -> Iterator[Record]:
        for path in record_paths(events)[:n_events]:
            data = read(path)
            names[id(data)] = path.name
            yield data

    written = write_records(records(), out, transform,
                            lambda d, _: f"{d.edge_index.shape[1]:,d} edges scored",
                            name=lambda d: names.pop(id(d)))
    print(f"scored {len(written)} event(s) into {out}")
    return 0
