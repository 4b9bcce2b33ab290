"""``trkx export --out DIR``: the three networks of a trained pipeline as ONNX files.

Writes ``embedding.onnx``, ``filter.onnx``, ``gnn.onnx`` and ``signatures.json`` (each file's
inputs and outputs, the widths and the working point) into DIR, for the shipped cells set unless
``--models NAME`` (a shipped set) or ``--config PIPELINE.yaml --checkpoints DIR`` (models you
trained) says otherwise. Each file is run by onnxruntime on a random graph of the real widths
and must give trkx's scores within 2e-5, float32 rounding (trkx.packaging.onnx_export, which
documents the inputs).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from trkx.stage_names import LEARNED_STAGES


def register(subparsers: argparse._SubParsersAction) -> None:
    from trkx.cli._help import description

    parser = subparsers.add_parser(
        "export", help="write the three networks as ONNX files (onnxruntime-checked)",
        description=description(__doc__))
    parser.add_argument("--out", type=Path, required=True, help="folder of the ONNX files")
    parser.add_argument("--models", default=None, metavar="NAME",
                        help="a shipped set (default: pu200_cells)")
    parser.add_argument("--config", type=Path, default=None, help="pipeline YAML of your models")
    parser.add_argument("--checkpoints", type=Path, default=None,
                        help="folder with embedding.pt, filter.pt, gnn.pt")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from trkx.config import ConfigError

    if (args.config is None) != (args.checkpoints is None):
        raise ConfigError("--config and --checkpoints go together (or neither: a shipped set)")
    if args.models is not None and args.config is not None:
        raise ConfigError("--models names a shipped set; --config/--checkpoints your own models:"
                          " give one of them")
    if args.out.exists() and not args.out.is_dir():
        raise ConfigError(f"--out {args.out}: exists and is not a folder")
    try:
        import onnxruntime  # noqa: F401
        import onnxscript  # noqa: F401
    except ImportError as exc:
        raise ConfigError(f"trkx export needs onnx, onnxscript and onnxruntime ({exc}); "
                          "pip install onnx onnxscript onnxruntime") from exc
    from trkx.pipeline.inference import TrainedPipeline

    if args.config is not None:
        pipeline = TrainedPipeline.load(args.config, args.checkpoints, device="cpu")
        name = str(args.checkpoints)
    else:
        from trkx.models import CELLS, shipped_models

        name = args.models or CELLS
        shipped = shipped_models(name)
        pipeline = TrainedPipeline.load(shipped.config, shipped.checkpoints, device="cpu")
    from trkx.packaging.onnx_export import export_networks

    signatures = export_networks(pipeline, args.out)
    differences = ", ".join(f"{stage} {signatures[stage]['max_difference']:.1e}"
                            for stage in LEARNED_STAGES)
    print(f"{name}: embedding.onnx, filter.onnx, gnn.onnx, signatures.json -> {args.out} "
          f"(onnxruntime against trkx, largest score difference: {differences})")
    return 0
