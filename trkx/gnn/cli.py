"""``trkx train gnn`` and ``trkx infer gnn`` (heavy imports live inside the functions).

Config (``configs/gnn.yaml``), one section per constructor:

    data:    GNNData            (train_dir, val_dir, pattern)
    model:   InteractionGNN     (node_features is read from the records when omitted)
    module:  GNNModule          (everything but ``model``)
    trainer: pytorch_lightning.Trainer

Training writes ``OUTPUT/gnn.pt`` (config + weights, see :mod:`trkx.gnn.checkpoint`);
inference adds ``scores`` to every record of a folder and writes them to another folder.
"""

from __future__ import annotations

import argparse
from dataclasses import asdict, dataclass
from pathlib import Path

SECTIONS = ("data", "model", "module", "trainer", "sampling")


@dataclass(frozen=True)
class GNNData:
    """Where the filter-stage event records are.

    Args:
        train_dir: folder of training records.
        val_dir: folder of validation records (None: no validation).
        pattern: glob of record files inside the folders.
    """

    train_dir: str
    val_dir: str | None = None
    pattern: str = "*.pt"


def add_train_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, help="YAML config (see configs/gnn.yaml)")
    parser.add_argument("--output", required=True, help="folder for gnn.pt and training logs")
    parser.add_argument("--train-dir", help="overrides data.train_dir")
    parser.add_argument("--val-dir", help="overrides data.val_dir")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument("overrides", nargs="*", metavar="KEY=VALUE",
                        help="config overrides, e.g. model.hidden=64 trainer.max_epochs=3")


def train(args: argparse.Namespace) -> int:
    import pytorch_lightning as pl
    from torch.utils.data import DataLoader

    from trkx.config import (
        ConfigError,
        apply_overrides,
        check_sections,
        instantiate,
        load_config,
        section,
    )
    from trkx.gnn.checkpoint import save_gnn_checkpoint
    from trkx.gnn.model import InteractionGNN
    from trkx.gnn.module import GNNModule
    from trkx.gnn.records import GraphRecordDataset, node_features_of, record_paths, single_event

    label = str(args.config)
    config = apply_overrides(load_config(args.config), args.overrides)
    if "distributed" in config:  # graph-parallel training under torchrun: trkx.gnn.distributed
        from trkx.gnn.distributed.train import train_from_config
        return train_from_config(config, args.output, label=label, train_dir=args.train_dir,
                                 seed=args.seed)
    check_sections(config, SECTIONS, label)
    data_config = section(config, "data", label)
    if args.train_dir:
        data_config["train_dir"] = args.train_dir
    if args.val_dir:
        data_config["val_dir"] = args.val_dir
    data = instantiate(GNNData, data_config, f"{label}: data")
    if not data.train_dir:
        raise ConfigError(f"{label}: data.train_dir is not set (set it or pass --train-dir)")
    train_paths = record_paths(data.train_dir, data.pattern)
    val_paths = record_paths(data.val_dir, data.pattern) if data.val_dir else []

    model_config = section(config, "model", label)
    model_config.setdefault("node_features", node_features_of(train_paths[0]))
    module_config = section(config, "module", label)
    pl.seed_everything(args.seed, verbose=False)
    model = instantiate(InteractionGNN, model_config, f"{label}: model")
    module = instantiate(GNNModule, {**module_config, "model": model}, f"{label}: module")

    output = Path(args.output)
    trainer_config = {"default_root_dir": str(output), **section(config, "trainer", label)}
    trainer = instantiate(pl.Trainer, trainer_config, f"{label}: trainer")
    if config.get("sampling") is not None:  # minibatches of sampled subgraphs (issue 14)
        from trkx.gnn.sampling.datamodule import make_train_loader
        loader = make_train_loader(section(config, "sampling", label), train_paths, args.seed,
                                   label)
    else:
        loader = DataLoader(GraphRecordDataset(train_paths), batch_size=1, shuffle=True,
                            collate_fn=single_event)
    val_loader = (DataLoader(GraphRecordDataset(val_paths), batch_size=1,
                             collate_fn=single_event) if val_paths else None)
    trainer.fit(module, loader, val_loader)

    metrics = module.last_val_metrics.as_dict("val_") if module.last_val_metrics else {}
    path = save_gnn_checkpoint(output / "gnn.pt", model, model_config, module_config, metrics)
    summary = ", ".join(f"{k} {v:.4f}" for k, v in metrics.items())
    print(f"wrote {path} (data {asdict(data)}){'; ' + summary if summary else ''}")
    return 0


def add_infer_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--checkpoint", required=True, help="gnn.pt written by `train gnn`")
    parser.add_argument("--input-dir", required=True, help="folder of filter-stage records")
    parser.add_argument("--output-dir", required=True,
                        help="folder for the records with GNN 'scores' added")
    parser.add_argument("--pattern", default="*.pt", help="record file glob (default *.pt)")
    parser.add_argument("--graph-ops", choices=("csr", "scatter", "auto"),
                        help="local kernel (default: the checkpoint's module.graph_ops)")
    parser.add_argument("--bf16", action="store_true",
                        help="bfloat16 autocast for the dense layers (faster on AVX-512 CPUs)")


def infer(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from trkx.config import ConfigError
    from trkx.data.errors import TrackMLFormatError
    from trkx.data.record import load_record, save_record
    from trkx.gnn.checkpoint import load_gnn_checkpoint
    from trkx.gnn.inference import score_edges
    from trkx.gnn.ops_factory import KernelChooser
    from trkx.gnn.records import INFERENCE_KEYS, check_graph_record, record_paths

    model, module_config = load_gnn_checkpoint(args.checkpoint)
    graph_ops = args.graph_ops or module_config.get("graph_ops", "auto")
    chooser = KernelChooser(width=model.hidden)
    paths = record_paths(args.input_dir, args.pattern)
    output = Path(args.output_dir)
    if output.resolve() == Path(args.input_dir).resolve():
        raise ConfigError(f"{output}: the output folder must differ from the input folder")
    for path in tqdm(paths, desc="gnn inference", unit="event"):
        data = load_record(path)
        check_graph_record(data, str(path), INFERENCE_KEYS)
        if data.x.shape[1] != model.node_features:
            raise TrackMLFormatError(f"{path}: 'x' has {data.x.shape[1]} features, the model "
                                     f"expects {model.node_features}")
        data.scores = score_edges(model, data.x, data.edge_index.long(), graph_ops, chooser,
                                  bf16=args.bf16)
        save_record(data, output / path.name)
    print(f"scored {len(paths)} event(s) into {output}")
    return 0
