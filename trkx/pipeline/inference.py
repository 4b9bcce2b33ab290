"""Trained pipeline inference on one event: record in, tracks out, time per stage.

    record --embedding--> points --graph--> radius graph --filter--> reduced graph
           --gnn--> edge scores --track building--> a track id per hit

This is the one inference path of trkx: ``trkx infer`` runs it on any events, and ``trkx run``
runs ``trkx infer`` on its test events. Each stage is the same pure function its stage command
(``trkx infer STAGE``) calls, with the settings of that stage's ``inference`` config section;
the pipeline YAML's own ``inference`` section (precision, graph_ops) is applied to every stage
as an override of those sections (:meth:`trkx.pipeline.config.PipelineConfig.stage_configs`),
so one setting decides the precision of all three learned stages.

    pipeline = TrainedPipeline.load()    # the shipped pile-up-200 models (trkx.models)
    pipeline = TrainedPipeline.load("configs/quickstart.yaml", "runs/quickstart/checkpoints")
    tracks = pipeline.reconstruct("data/event000000001")  # event_id, hit_id, track_id

Edge truth labels are attached only when asked (``edge_labels=True``, for per-stage figures):
inference does not need them.
"""

from __future__ import annotations

import copy
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch_geometric.data import Data

from trkx.config import ConfigError, apply_overrides, instantiate, load_config, section

if TYPE_CHECKING:
    import pandas as pd

    from trkx.embedding.inference import EmbeddingInference
    from trkx.embedding.model import EmbeddingMLP
    from trkx.filter.checkpoint import FilterInference
    from trkx.filter.model import FilterMLP
    from trkx.gnn.model import InteractionGNN
    from trkx.gnn.ops_factory import KernelChooser
    from trkx.tracks.building import TrackBuilder

CHECKPOINT_FILES = {"embedding": "embedding.pt", "filter": "filter.pt", "gnn": "gnn.pt"}
#: ``stage -> (stage YAML, overrides)`` for embedding, filter, gnn and tracks.
StageConfigs = dict[str, tuple[Path, list[str]]]


def checkpoint_paths(directory: str | os.PathLike) -> dict[str, Path]:
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
    """Loaded models and the inference settings of every stage."""

    embedding: EmbeddingMLP
    embedding_options: EmbeddingInference
    radius: float
    max_neighbours: int
    use_cells: bool
    signal_pt_min: float
    filter: FilterMLP
    filter_options: FilterInference
    filter_cut: float
    gnn: InteractionGNN
    gnn_precision: str
    graph_ops: str
    builder: TrackBuilder
    chooser: KernelChooser

    @classmethod
    def load(cls, config: str | os.PathLike | None = None,
             checkpoints: str | os.PathLike | None = None,
             overrides: Sequence[str] = ()) -> TrainedPipeline:
        """The models of ``checkpoints`` (``embedding.pt``, ``filter.pt``, ``gnn.pt``) with the
        settings of the pipeline YAML ``config`` (and ``--set``-style ``overrides``); with
        neither, the models shipped with trkx (:func:`trkx.models.shipped_models`)."""
        from trkx.pipeline.config import load_pipeline_config

        if config is None and checkpoints is None:
            from trkx.models import shipped_models

            shipped = shipped_models()
            config, checkpoints = shipped.config, shipped.checkpoints
        elif config is None or checkpoints is None:
            raise ConfigError("give both a pipeline config and its checkpoints, or neither "
                              "(the shipped models)")

        pipeline = load_pipeline_config(config, list(overrides))
        return cls.from_stage_configs(checkpoints, pipeline.stage_configs())

    @classmethod
    def from_stage_configs(cls, checkpoints: str | os.PathLike,
                           stage_configs: StageConfigs) -> TrainedPipeline:
        """Load the models; ``stage_configs[stage] = (yaml path, overrides)`` give each stage's
        ``inference`` section and the tracks ``builder``. A null value there takes the
        checkpoint's working point (builder keys: the GNN checkpoint's, e.g. ``walk_cut``)."""
        from trkx.embedding.checkpoint import load_model as load_embedding
        from trkx.embedding.inference import EmbeddingInference
        from trkx.filter.checkpoint import FilterInference
        from trkx.filter.checkpoint import load_model as load_filter
        from trkx.gnn.checkpoint import GNNInference
        from trkx.gnn.checkpoint import load_model as load_gnn
        from trkx.gnn.ops_factory import KernelChooser
        from trkx.tracks.building import TrackBuilder
        from trkx.tracks.tuning import builder_options
        from trkx.training.data import EmbeddingData

        paths = checkpoint_paths(checkpoints)

        def stage_section(stage: str, name: str) -> tuple[dict, str]:
            """Section ``name`` of ``stage``'s config (overrides applied) and its label."""
            path, overrides = stage_configs[stage]
            config = apply_overrides(load_config(path), overrides)
            return section(config, name, str(path)), f"{path}: {name}"

        def options(stage: str, kind: type):
            values, label = stage_section(stage, "inference")
            return instantiate(kind, values, label), label

        embedding_options, _ = options("embedding", EmbeddingInference)
        filter_options, filter_label = options("filter", FilterInference)
        gnn_options, _ = options("gnn", GNNInference)
        embedding, emb = load_embedding(paths["embedding"])
        trained = instantiate(EmbeddingData, emb.config.get("data") or {},
                              f"{paths['embedding']}: data")
        filter_net, filt = load_filter(paths["filter"])
        gnn, gnn_checkpoint = load_gnn(paths["gnn"])
        builder_section, tracks_label = stage_section("tracks", "builder")
        try:
            built = builder_options(builder_section, gnn_checkpoint.working_point,
                                    tracks_label)
        except ValueError as exc:
            raise ConfigError(str(exc)) from exc
        try:
            filter_cut = filter_options.cut(filt)
        except ValueError as exc:
            raise ConfigError(f"{filter_label}: {exc}") from exc
        builder = instantiate(TrackBuilder, built, tracks_label)
        radius, k = embedding_options.working_point(emb.working_point)
        pipeline = cls(
            embedding=embedding, embedding_options=embedding_options, radius=radius,
            max_neighbours=k, use_cells=trained.use_cells, signal_pt_min=trained.signal_pt_min,
            filter=filter_net, filter_options=filter_options, filter_cut=filter_cut, gnn=gnn,
            gnn_precision=gnn_options.precision, graph_ops=gnn_options.kernel(gnn_checkpoint),
            builder=builder, chooser=KernelChooser(width=gnn.hidden, backward=False))
        pipeline.warm_up()
        return pipeline

    def warm_up(self, hits: int = 64) -> None:
        """Load the compiled kernels of graph and track building (numba: from its disk cache,
        once compiled) and start numba's thread pool, on a tiny random event of the real
        types, so that this one-off cost (~0.3-1 s in a fresh process, seconds more on the
        first-ever compile) is paid with the models, not by the first event."""
        from trkx.embedding.graph import build_edges

        generator = torch.Generator().manual_seed(0)
        dim = self.embedding.net[-1].out_features
        points = torch.nn.functional.normalize(torch.randn(hits, dim, generator=generator), dim=1)
        pos = torch.rand(hits, 3, generator=generator) * torch.tensor([1000.0, 6.0, 2000.0])
        pos[:, 1] -= 3.0
        edges = build_edges(points, 2.0, 4, self.embedding_options.backend, pos=pos)
        layers = torch.arange(hits) % 4
        self.builder.build(Data(edge_index=edges, scores=torch.full((edges.shape[1],), 0.9),
                                num_nodes=hits, pos=pos, volume_id=torch.full((hits,), 8),
                                layer_id=2 * layers + 2))

    @property
    def precisions(self) -> dict[str, str]:
        """The precision of each learned stage's dense layers (trkx.precision)."""
        return {"embedding": self.embedding_options.precision,
                "filter": self.filter_options.precision, "gnn": self.gnn_precision}

    @torch.no_grad()
    def run(self, record: Data, edge_labels: bool = False,
            ) -> tuple[dict[str, Data], np.ndarray, dict[str, float]]:
        """Graphs after each stage, the track id of every hit, and seconds per stage
        (``embedding``, ``graph``, ``filter``, ``gnn``, ``tracks``)."""
        from trkx.embedding.inference import embedding_graph
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

        embedded = embedding_graph(self.embedding, record, self.radius, self.max_neighbours,
                                   self.embedding_options.backend,
                                   self.embedding_options.precision, edge_labels, lap)
        clock = time.perf_counter()          # labelling is evaluation, not inference
        filtered = filter_graph(self.filter, embedded, self.filter_cut,
                                self.filter_options.chunk_size, self.filter_options.precision)
        lap("filter")
        scored = copy.copy(filtered)         # shallow: only the scores are new
        scored.scores = score_edges(self.gnn, filtered.x, filtered.edge_index.long(),
                                    self.graph_ops, self.chooser, precision=self.gnn_precision,
                                    edge_attr=model_edge_inputs(self.gnn, filtered))
        lap("gnn")
        labels = self.builder.build(scored)
        lap("tracks")
        return {"embedding": embedded, "filter": filtered, "gnn": scored}, labels, seconds

    def reconstruct(self, prefix: str | os.PathLike) -> pd.DataFrame:
        """Tracks of one TrackML event (``dir/eventNNNNNNNNN``; truth is never read): the
        submission frame ``event_id, hit_id, track_id``, one row per hit of the event."""
        from trkx.data.detector import load_detector
        from trkx.data.events import event_record
        from trkx.tracks.building import tracks_frame

        record = event_record(str(prefix), load_detector(), self.use_cells, self.signal_pt_min,
                              with_truth=False)
        _, labels, _ = self.run(record)
        return tracks_frame(record.hit_id, labels, int(record.event_id))
