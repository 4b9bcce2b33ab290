"""``trkx train filter`` and ``trkx infer filter``.

    trkx train filter --config configs/filter.yaml [KEY=VALUE ...]
    trkx infer filter --config configs/filter.yaml --events DIR --out DIR

Input events are the embedding stage's records (``*.pt`` with ``edge_index`` and labels).
Config sections (one-to-one onto constructor arguments): ``model`` -> FilterModule, ``data`` ->
trkx.embedding.events.EventRecords, ``trainer`` -> pytorch_lightning.Trainer,
``inference`` -> FilterInference; ``checkpoint`` is the model file.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from trkx.stage_tools import add_config_arguments, checkpoint_path, output_path, stage_config

SECTIONS = ("model", "data", "trainer", "inference", "checkpoint")
DEFAULT_CONFIG = "configs/filter.yaml"


@dataclass(frozen=True)
class FilterInference:
    """Config section ``inference``: the score cut (None: the model's) and the chunk size."""

    score_cut: float | None = None
    chunk_size: int = 500_000

    def __post_init__(self) -> None:
        if self.score_cut is not None and not 0.0 <= self.score_cut <= 1.0:
            raise ValueError(f"score_cut must be in [0, 1], got {self.score_cut}")
        if self.chunk_size < 1:
            raise ValueError(f"chunk_size must be >= 1, got {self.chunk_size}")


def add_train_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_arguments(parser, DEFAULT_CONFIG)
    parser.add_argument("--checkpoint", default=None, help="where to write the trained model")


def add_infer_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_arguments(parser, DEFAULT_CONFIG)
    parser.add_argument("--checkpoint", default=None, help="trained model (default: config)")
    parser.add_argument("--events", required=True, help="folder of embedding-stage records")
    parser.add_argument("--out", required=True, help="folder for the filtered records")
    parser.add_argument("--nevents", type=int, default=None)


def train(args: argparse.Namespace) -> int:
    import torch

    from trkx.config import instantiate, section
    from trkx.embedding.checkpoint import save_checkpoint
    from trkx.embedding.events import EventRecords
    from trkx.filter.module import FilterModule
    from trkx.stage_tools import make_trainer

    config = stage_config(args, SECTIONS)
    label = str(args.config)
    data = instantiate(EventRecords, section(config, "data", label), f"{label}: data")
    module = instantiate(FilterModule, section(config, "model", label), f"{label}: model")
    checkpoint = checkpoint_path(args, config)
    trainer = make_trainer(section(config, "trainer", label), label)
    torch.manual_seed(module.hparams.seed)
    trainer.fit(module, datamodule=data)
    metrics = {k: float(v) for k, v in trainer.callback_metrics.items()}
    save_checkpoint(checkpoint, "filter", dict(module.hparams), module.network.state_dict(),
                    {"train_events": data.train_events, "metrics": metrics})
    print(f"filter: trained on {data.train_events} events -> {checkpoint}")
    for key, value in sorted(metrics.items()):
        print(f"  {key} = {value:.4f}")
    return 0


def load_network(path: str):
    """(FilterMLP, hparams, extra) from a filter checkpoint."""
    from trkx.embedding.checkpoint import load_checkpoint
    from trkx.filter.model import FilterMLP

    payload = load_checkpoint(path, "filter")
    hp = payload["hparams"]
    network = FilterMLP(hp["hit_features"], hp["cell_agreement"], hp["hidden"], hp["layers"])
    network.load_state_dict(payload["state_dict"])
    network.eval()
    return network, hp, payload["extra"]


def infer(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from trkx.config import instantiate, section
    from trkx.data.record import save_record
    from trkx.embedding.events import load_records
    from trkx.filter.inference import apply_cut, score_edges
    from trkx.filter.module import filter_metrics

    config = stage_config(args, SECTIONS)
    label = str(args.config)
    options = instantiate(FilterInference, section(config, "inference", label),
                          f"{label}: inference")
    network, hp, _ = load_network(checkpoint_path(args, config))
    cut = options.score_cut if options.score_cut is not None else hp["score_cut"]
    records = load_records(args.events, args.nevents)
    for record in tqdm(records, desc="filter"):
        if getattr(record, "edge_index", None) is None:
            raise ValueError(f"{args.events}: event {int(record.event_id)} has no edge_index "
                             "(run `trkx infer embedding` first)")
        scores = score_edges(network, record, options.chunk_size)
        out = apply_cut(record, scores, cut)
        path = save_record(out, output_path(int(record.event_id), args.out))
        line = f"{path}: {record.edge_index.shape[1]:,d} -> {out.edge_index.shape[1]:,d} edges"
        if getattr(record, "signal", None) is not None:
            m = filter_metrics(record, scores, cut)
            line += (f", signal efficiency {m['signal_efficiency']:.4f}, fake rejection "
                     f"{m['fake_rejection']:.4f}, purity {m['purity']:.4f}")
        print(line)
    return 0

