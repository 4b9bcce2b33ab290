"""Trained pipeline inference on one event: record in, tracks out, time per stage.

    record --embedding--> points --graph--> radius graph --filter--> reduced graph
           --gnn--> edge scores --track building--> a track id per hit

The dense layers of the three learned stages run at ``precision`` (trkx.precision: ``auto``
takes bf16 only where it measures faster). Edge truth labels are attached only when asked
(``edge_labels=True``, for per-stage figures): inference does not need them.

Every stage is the same pure function the stage CLIs use; this module only loads the trained
models once (``WORKDIR/checkpoints/{embedding,filter,gnn}.pt``) and times each stage.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch_geometric.data import Data

from trkx.config import ConfigError, apply_overrides, instantiate, load_config, section
from trkx.precision import check_precision

CHECKPOINT_FILES = {"embedding": "embedding.pt", "filter": "filter.pt", "gnn": "gnn.pt"}


def checkpoint_paths(directory: str | Path) -> dict[str, Path]:
    """The three checkpoint files of a trained pipeline (all must exist)."""
    directory = Path(directory)
    paths = {stage: directory / name for stage, name in CHECKPOINT_FILES.items()}
    missing = [str(p) for p in paths.values() if not p.is_file()]
    if missing:
        raise FileNotFoundError(f"{directory}: missing checkpoint(s) {', '.join(missing)} "
                                "(train them with `trkx run` or `trkx train STAGE`)")
    return paths


@dataclass
class TrainedPipeline:
    """Loaded models and working points of every stage."""

    embedding: Any
    radius: float
    max_neighbours: int
    graph_backend: str
    use_cells: bool
    signal_pt_min: float
    filter: Any
    filter_cut: float
    filter_chunk: int
    gnn: Any
    graph_ops: str
    precision: str
    builder: Any
    chooser: Any = field(default=None)

    @classmethod
    def load(cls, checkpoints: str | Path, stage_configs: dict[str, tuple[Path, list[str]]],
             graph_ops: str = "auto", precision: str = "auto") -> TrainedPipeline:
        """Load the models; ``stage_configs[stage] = (yaml path, overrides)`` give the working
        points (embedding ``graph``, filter ``inference``, tracks ``builder``); a null value
        there takes the checkpoint's working point. Builder keys set to null take the GNN
        checkpoint's working point of the same name (e.g. ``walk_cut``)."""
        from trkx.embedding.checkpoint import load_model as load_embedding
        from trkx.embedding.inference import GraphBuilding
        from trkx.filter.checkpoint import FilterInference
        from trkx.filter.checkpoint import load_model as load_filter
        from trkx.gnn.checkpoint import load_model as load_gnn
        from trkx.gnn.ops_factory import KernelChooser
        from trkx.tracks.building import TrackBuilder
        from trkx.tracks.tuning import builder_options
        from trkx.training.data import EmbeddingData

        paths = checkpoint_paths(checkpoints)

        def stage_section(stage: str, name: str) -> dict:
            path, overrides = stage_configs[stage]
            return section(apply_overrides(load_config(path), overrides), name, str(path))

        def label(stage: str, name: str) -> str:
            return f"{stage_configs[stage][0]}: {name}"

        graph = instantiate(GraphBuilding, stage_section("embedding", "graph"),
                            label("embedding", "graph"))
        embedding, emb = load_embedding(paths["embedding"])
        trained = instantiate(EmbeddingData, emb.config.get("data") or {},
                              f"{paths['embedding']}: data")
        filter_options = instantiate(FilterInference, stage_section("filter", "inference"),
                                     label("filter", "inference"))
        filter_net, filt = load_filter(paths["filter"])
        gnn, gnn_checkpoint = load_gnn(paths["gnn"])
        try:
            options = builder_options(stage_section("tracks", "builder"),
                                      gnn_checkpoint.working_point, label("tracks", "builder"))
        except ValueError as exc:
            raise ConfigError(str(exc)) from exc
        builder = instantiate(TrackBuilder, options, label("tracks", "builder"))
        if graph_ops not in ("csr", "scatter", "auto"):
            raise ConfigError(f"graph_ops must be csr, scatter or auto, not {graph_ops!r}")
        try:
            check_precision(precision)
        except ValueError as exc:
            raise ConfigError(str(exc)) from exc
        try:
            filter_cut = filter_options.cut(filt)
        except ValueError as exc:
            raise ConfigError(f"{label('filter', 'inference')}: {exc}") from exc
        point = emb.working_point
        return cls(
            embedding=embedding,
            radius=graph.radius if graph.radius is not None else point["radius"],
            max_neighbours=int(graph.max_neighbours if graph.max_neighbours is not None
                               else point["max_neighbours"]),
            graph_backend=graph.backend, use_cells=trained.use_cells,
            signal_pt_min=trained.signal_pt_min, filter=filter_net, filter_cut=filter_cut,
            filter_chunk=filter_options.chunk_size, gnn=gnn, graph_ops=graph_ops,
            precision=precision,
            builder=builder, chooser=KernelChooser(width=gnn.hidden, backward=False))

    @torch.no_grad()
    def run(self, record: Data, edge_labels: bool = False,
            ) -> tuple[dict[str, Data], np.ndarray, dict[str, float]]:
        """Graphs after each stage, the track id of every hit, and seconds per stage
        (``embedding``, ``graph``, ``filter``, ``gnn``, ``tracks``)."""
        from trkx.embedding.graph import build_edges
        from trkx.embedding.inference import embed
        from trkx.embedding.labels import label_edges
        from trkx.filter.inference import filter_graph
        from trkx.gnn.edge_inputs import model_edge_inputs
        from trkx.gnn.inference import score_edges

        seconds: dict[str, float] = {}
        clock = time.perf_counter()

        def lap(name: str) -> None:
            nonlocal clock
            now = time.perf_counter()
            seconds[name] = now - clock
            clock = now

        points = embed(self.embedding, record.x, precision=self.precision)
        lap("embedding")
        embedded = copy.copy(record)        # shallow: the hit tensors are shared, not copied
        embedded.edge_index = build_edges(points, self.radius, self.max_neighbours,
                                          self.graph_backend, pos=record.pos).cpu()
        lap("graph")
        if edge_labels and getattr(record, "particle_id", None) is not None:
            embedded.y, embedded.y_pid, embedded.signal = label_edges(record,
                                                                      embedded.edge_index)
            clock = time.perf_counter()          # labelling is evaluation, not inference
        filtered = filter_graph(self.filter, embedded, self.filter_cut, self.filter_chunk,
                                precision=self.precision)
        lap("filter")
        scored = copy.copy(filtered)
        scored.scores = score_edges(self.gnn, filtered.x, filtered.edge_index, self.graph_ops,
                                    self.chooser, precision=self.precision,
                                    edge_attr=model_edge_inputs(self.gnn, filtered))
        lap("gnn")
        labels = self.builder.build(scored)
        lap("tracks")
        return {"embedding": embedded, "filter": filtered, "gnn": scored}, labels, seconds
