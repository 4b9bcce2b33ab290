"""``trkx train embedding`` and ``trkx infer embedding``.

    trkx train embedding --config configs/embedding.yaml [KEY=VALUE ...]
    trkx infer embedding --config configs/embedding.yaml --events DIR --out DIR

Config sections (each maps one-to-one onto constructor arguments): ``model`` ->
EmbeddingModule, ``data`` -> EventRecords, ``trainer`` -> pytorch_lightning.Trainer,
``graph`` -> GraphBuilding; ``checkpoint`` is the model file written by train and read by
infer (``--checkpoint`` overrides it).
"""

from __future__ import annotations

import argparse

from trkx.stage_tools import add_config_arguments, checkpoint_path, output_path, stage_config

SECTIONS = ("model", "data", "trainer", "graph", "checkpoint")
DEFAULT_CONFIG = "configs/embedding.yaml"


def add_train_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_arguments(parser, DEFAULT_CONFIG)
    parser.add_argument("--checkpoint", default=None, help="where to write the trained model")


def add_infer_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_arguments(parser, DEFAULT_CONFIG)
    parser.add_argument("--checkpoint", default=None, help="trained model (default: config)")
    parser.add_argument("--events", required=True,
                        help="folder of TrackML events or of event records (*.pt)")
    parser.add_argument("--out", required=True, help="folder for the output event records")
    parser.add_argument("--nevents", type=int, default=None)


def train(args: argparse.Namespace) -> int:
    import torch

    from trkx.config import instantiate, section
    from trkx.embedding.checkpoint import save_checkpoint
    from trkx.embedding.events import EventRecords
    from trkx.embedding.module import EmbeddingModule

    config = stage_config(args, SECTIONS)
    label = str(args.config)
    model_options = section(config, "model", label)
    data = instantiate(EventRecords, section(config, "data", label), f"{label}: data")
    module = instantiate(EmbeddingModule, model_options, f"{label}: model")
    checkpoint = checkpoint_path(args, config)
    from trkx.stage_tools import make_trainer

    trainer = make_trainer(section(config, "trainer", label), label)
    torch.manual_seed(module.hparams.seed)
    trainer.fit(module, datamodule=data)
    metrics = {k: float(v) for k, v in trainer.callback_metrics.items()}
    save_checkpoint(checkpoint, "embedding", dict(module.hparams),
                    module.network.state_dict(),
                    {"train_events": data.train_events, "use_cells": data.use_cells,
                     "metrics": metrics})
    print(f"embedding: trained on {data.train_events} events -> {checkpoint}")
    for key, value in sorted(metrics.items()):
        print(f"  {key} = {value:.4f}")
    return 0


def load_network(path: str):
    """(EmbeddingMLP, hparams, extra) from an embedding checkpoint."""
    from trkx.embedding.checkpoint import load_checkpoint
    from trkx.embedding.model import EmbeddingMLP

    payload = load_checkpoint(path, "embedding")
    hp = payload["hparams"]
    network = EmbeddingMLP(hp["in_features"], hp["hidden"], hp["layers"], hp["embedding_dim"],
                           hp["layer_norm"])
    network.load_state_dict(payload["state_dict"])
    network.eval()
    return network, hp, payload["extra"]


def infer(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from trkx.config import instantiate, section
    from trkx.data.record import save_record
    from trkx.embedding.events import load_records
    from trkx.embedding.inference import GraphBuilding, embedding_graph
    from trkx.embedding.labels import graph_metrics

    config = stage_config(args, SECTIONS)
    label = str(args.config)
    graph = instantiate(GraphBuilding, section(config, "graph", label), f"{label}: graph")
    network, hp, extra = load_network(checkpoint_path(args, config))
    data_options = section(config, "data", label)
    # Records keep every feature the config asks for (the filter uses cell features), the
    # network reads its leading columns.
    records = load_records(args.events, args.nevents,
                           use_cells=data_options.get("use_cells", extra.get("use_cells", False)),
                           signal_pt_min=data_options.get("signal_pt_min", 1.0))
    radius = graph.radius if graph.radius is not None else hp["radius"]
    k = graph.max_neighbours if graph.max_neighbours is not None else hp["max_neighbours"]
    for record in tqdm(records, desc="embedding graphs"):
        out = embedding_graph(network, record, radius, k, graph.backend)
        path = save_record(out, output_path(int(record.event_id), args.out))
        line = f"{path}: {out.edge_index.shape[1]:,d} edges"
        if getattr(out, "signal", None) is not None:
            m = graph_metrics(out)
            line += (f", efficiency {m['edge_efficiency']:.4f}, purity {m['purity']:.4f}, "
                     f"{m['edges_per_hit']:.1f} edges/hit")
        print(line)
    return 0
