"""The three networks of a trained pipeline as ONNX files, checked with onnxruntime.

``trkx export --out DIR`` writes, for the shipped cells set unless told otherwise:

- ``embedding.onnx``: ``hits`` [N, F] float32, trkx's hit features (trkx.data.features:
  scaled r, phi, z, then the cluster shape with cells) -> ``points`` [N, D] float32, unit
  vectors; neighbours within the pipeline's radius are candidate edges.
- ``filter.onnx``: ``edge_features`` [E, F_e] float32, the filter's edge rows
  (trkx.filter.features) -> ``scores`` [E] float32 in [0, 1].
- ``gnn.onnx``: ``hits`` [N, F_n] float32 (the leading F_n hit features), ``edge_index``
  [2, E] int64 (inner -> outer), ``edge_inputs`` [E, a] float32 (trkx.gnn.edge_inputs; absent
  when a = 0) -> ``scores`` [E] float32 in [0, 1].

N and E are dynamic. The graph (the neighbour search, the filter's cut, the edge inputs) and the
track building stay trkx's; the files hold the learned arithmetic, for an inference server or
the ACTS GNN plugin. ``signatures.json`` beside them gives these shapes, the model widths, the
pipeline's working point (radius, neighbours, filter cut, the builder's edge cut) and, per file,
the largest difference between onnxruntime's scores and trkx's own (float32 plain modules) on a
random graph of the real widths, which must stay within :data:`TOLERANCE`.

The GNN is exported through a gather / scatter-add form of its graph operators (``Gather`` and
``ScatterElements`` with addition in ONNX), the same function as trkx's CSR kernels.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

#: Largest |onnxruntime - torch| score difference accepted when a file is checked: both run in
#: float32, whose rounding alone moves the hits-only GNN's scores on the check's random graph by
#: up to 1.3e-5 from the float64 network's (torch float32 against float64, 8 seeds: 2.3e-6 to
#: 1.3e-5; onnxruntime against torch 2.3e-6 to 1.25e-5), so 1e-5 would refuse rounding; a wrong
#: operator or order moves scores by far more.
TOLERANCE = 2e-5
OPSET = 18


class _ScatterGraph:
    """The GraphOps of a traced forward: ``S X = X[s]``, ``D^T E = scatter-add of E into d``;
    sizes are the traced tensors' (no validation: it would make the trace data-dependent),
    and no ``endpoints``, so the model takes its plain (exportable) path."""

    def __init__(self, edge_index: Tensor, num_nodes: Any) -> None:
        self._src, self._dst = edge_index[0], edge_index[1]
        self._num_nodes = num_nodes

    @property
    def num_nodes(self) -> Any:
        return self._num_nodes

    @property
    def num_edges(self) -> Any:
        return self._src.shape[0]

    def gather(self, x: Tensor) -> tuple[Tensor, Tensor]:
        return x.index_select(0, self._src), x.index_select(0, self._dst)

    def aggregate(self, e: Tensor) -> tuple[Tensor, Tensor]:
        shape = (self._num_nodes, e.shape[1])
        width = e.shape[1]
        return (e.new_zeros(shape).scatter_add(0, self._dst[:, None].expand(-1, width), e),
                e.new_zeros(shape).scatter_add(0, self._src[:, None].expand(-1, width), e))


class EmbeddingExport(nn.Module):
    """``hits -> points`` (the embedding network)."""

    def __init__(self, network: nn.Module) -> None:
        super().__init__()
        self.network = network

    def forward(self, hits: Tensor) -> Tensor:
        return self.network(hits)


class FilterExport(nn.Module):
    """``edge_features -> scores = sigmoid(logits)`` (the filter network's plain modules)."""

    def __init__(self, network: nn.Module) -> None:
        super().__init__()
        self.network = network

    def forward(self, edge_features: Tensor) -> Tensor:
        return torch.sigmoid(self.network.net(edge_features).squeeze(-1))


class GNNExport(nn.Module):
    """``(hits, edge_index[, edge_inputs]) -> scores`` (the interaction network)."""

    def __init__(self, network: nn.Module) -> None:
        super().__init__()
        self.network = network

    def forward(self, hits: Tensor, edge_index: Tensor,
                edge_inputs: Tensor | None = None) -> Tensor:
        ops = _ScatterGraph(edge_index, hits.shape[0])
        return torch.sigmoid(self.network(hits, ops, edge_inputs))


def example_inputs(pipeline: Any, hits: int = 300, edges: int = 2000,
                   seed: int = 0) -> dict[str, tuple[Tensor, ...]]:
    """Random inputs of the real widths for each network (the trace and the check)."""
    generator = torch.Generator().manual_seed(seed)
    features = pipeline.embedding.in_features
    x = torch.rand(hits, max(features, pipeline.gnn.node_features), generator=generator)
    edge_index = torch.randint(0, hits, (2, edges), generator=generator)
    gnn_inputs: tuple[Tensor, ...] = (x[:, :pipeline.gnn.node_features], edge_index)
    if pipeline.gnn.edge_features:
        gnn_inputs += (torch.randn(edges, pipeline.gnn.edge_features, generator=generator),)
    return {"embedding": (x[:, :features],),
            "filter": (torch.randn(edges, pipeline.filter.in_features, generator=generator),),
            "gnn": gnn_inputs}


INPUT_NAMES = {"embedding": ["hits"], "filter": ["edge_features"],
               "gnn": ["hits", "edge_index", "edge_inputs"]}
OUTPUT_NAMES = {"embedding": ["points"], "filter": ["scores"], "gnn": ["scores"]}


def _dynamic_shapes(stage: str, count: int) -> tuple[dict[int, Any], ...]:
    nodes, edges = torch.export.Dim("nodes", min=2), torch.export.Dim("edges", min=2)
    if stage == "embedding":
        return ({0: nodes},)
    if stage == "filter":
        return ({0: edges},)
    return ({0: nodes}, {1: edges}, {0: edges})[:count]


@contextlib.contextmanager
def _quiet_exporter() -> Iterator[None]:
    """torch's exporter without its notes (missing torchvision operators, deprecations, the
    renamed dynamic axes): the command prints its own line."""
    logger = logging.getLogger("torch.onnx")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logger.setLevel(level)


def export_networks(pipeline: Any, out: str | os.PathLike) -> dict[str, Any]:
    """Write the three ONNX files and ``signatures.json`` into ``out`` (made when missing;
    each file through a temporary name, then renamed) and check each against torch with
    onnxruntime; returns the signatures. A difference above :data:`TOLERANCE` is a
    RuntimeError (nothing is renamed into place for that file)."""
    import onnxruntime

    from trkx.files.atomic import atomic_write

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    wrappers = {"embedding": EmbeddingExport(pipeline.embedding),
                "filter": FilterExport(pipeline.filter), "gnn": GNNExport(pipeline.gnn)}
    inputs = example_inputs(pipeline)
    checks = example_inputs(pipeline, hits=517, edges=4111, seed=1)   # other sizes
    differences = {}
    for stage, wrapper in wrappers.items():
        wrapper = wrapper.cpu().eval().float()
        args = inputs[stage]
        names = INPUT_NAMES[stage][:len(args)]

        def write(tmp: Path, wrapper=wrapper, args=args, names=names, stage=stage) -> None:
            with torch.no_grad(), _quiet_exporter():
                program = torch.onnx.export(
                    wrapper, args, dynamo=True, input_names=names,
                    output_names=OUTPUT_NAMES[stage], opset_version=OPSET,
                    dynamic_shapes=_dynamic_shapes(stage, len(args)), verbose=False)
            program.save(str(tmp))
            session = onnxruntime.InferenceSession(str(tmp),
                                                   providers=["CPUExecutionProvider"])
            check = checks[stage]
            expected = wrapper(*check).detach()
            got = session.run(None, {name: value.numpy() for name, value in zip(names, check)})
            difference = float((torch.from_numpy(got[0]) - expected).abs().max())
            if not difference <= TOLERANCE:
                raise RuntimeError(f"{stage}.onnx: onnxruntime differs from torch by "
                                   f"{difference:.2e} (> {TOLERANCE:g})")
            differences[stage] = difference

        atomic_write(out / f"{stage}.onnx", write)
    signatures = signature_table(pipeline, differences)
    atomic_write(out / "signatures.json",
                 lambda tmp: tmp.write_text(json.dumps(signatures, indent=1) + "\n"))
    return signatures


def signature_table(pipeline: Any, differences: dict[str, float]) -> dict[str, Any]:
    """The inputs, outputs, widths and working point of the exported files."""
    gnn = pipeline.gnn
    gnn_inputs = {"hits": f"[N, >= {gnn.node_features}] float32 (leading columns read)",
                  "edge_index": "[2, E] int64, inner -> outer"}
    if gnn.edge_features:
        gnn_inputs["edge_inputs"] = f"[E, {gnn.edge_features}] float32 (trkx.gnn.edge_inputs)"
    return {
        "opset": OPSET,
        "embedding": {"inputs": {"hits": f"[N, {pipeline.embedding.in_features}] float32"},
                      "outputs": {"points": "[N, D] float32, unit vectors"},
                      "radius": pipeline.radius, "max_neighbours": pipeline.max_neighbours,
                      "other_layers_only": pipeline.embedding_options.other_layers_only,
                      "max_difference": differences.get("embedding")},
        "filter": {"inputs": {"edge_features": f"[E, {pipeline.filter.in_features}] float32 "
                              "(trkx.filter.features)"},
                   "outputs": {"scores": "[E] float32"}, "cut": pipeline.filter_cut,
                   "max_difference": differences.get("filter")},
        "gnn": {"inputs": gnn_inputs, "outputs": {"scores": "[E] float32"},
                "hidden": gnn.hidden, "iterations": gnn.n_graph_iters,
                "edge_cut": pipeline.builder.edge_cut if hasattr(pipeline.builder, "edge_cut")
                else None,
                "max_difference": differences.get("gnn")},
    }
