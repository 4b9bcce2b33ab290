"""Trained pipeline inference on one event: record in, tracks out, time per stage.

    record --embedding--> points --graph--> radius graph --filter--> reduced graph
           --gnn--> edge scores --track building--> a track id per hit

This is the one inference path of trkx: ``trkx infer`` runs it on any events, and ``trkx run``
runs ``trkx infer`` on its test events. Each stage is the same pure function its stage command
(``trkx infer STAGE``) calls, with the settings of that stage's ``inference`` config section;
the pipeline YAML's own ``inference`` section (precision, graph_ops) is applied to every stage
as an override of those sections (:meth:`trkx.pipeline.config.PipelineConfig.stage_configs`),
so one setting decides the precision of all three learned stages.

Users reconstruct events with :class:`trkx.pipeline.reconstruct.Reconstructor` (the one public
entry: the shipped sets chosen per event, or your own models), which makes ``trkx infer``'s
tracks. Its engine is :class:`TrainedPipeline` (one model set): ``run(record)`` gives every
stage's graph, and ``event_tracks(detector, prefix)`` reads one event, runs the pipeline and
returns the tracks, their parameters and the seconds per stage (what ``trkx infer``'s batch,
trkx.pipeline.batch, and the Reconstructor run).

Edge truth labels are attached only when asked (``edge_labels=True``, for per-stage figures):
inference does not need them.

The device (``device="auto"|"cpu"|"cuda"``, :mod:`trkx.runtime.device`; ``auto`` takes CUDA
when torch sees it) holds the three networks; :meth:`TrainedPipeline.run` moves the hit tensors
the learned stages read (``x``, ``pos``) there once, and the embedding, neighbour search,
filter, edge inputs and GNN run there on the same code as on the CPU. What runs on the CPU, and why:

- reading the event files and building the record (pandas);
- turning the neighbour table into unique inner -> outer edges (a numba kernel; the table goes
  to the CPU and the edges come back once), and the search itself for the numba ``bucket``,
  ``kdtree`` and CPU FAISS backends (``auto`` picks ``faiss_gpu`` or ``torch`` on CUDA);
- edge labels (numpy truth matching, evaluation only);
- track building (numba/numpy graph walks): the scored graph moves to the CPU once, and
  :meth:`run` returns every stage's graph on the CPU.
"""

from __future__ import annotations

import copy
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from trkx.config import ConfigError, apply_overrides, instantiate, load_config, section
from trkx.data.record_type import Record
from trkx.runtime.device import resolve_device, synchronize
from trkx.runtime.fused_mlp import fused_inference

if TYPE_CHECKING:
    import pandas as pd

    from trkx.embedding.inference import EmbeddingInference
    from trkx.embedding.model import EmbeddingMLP
    from trkx.filter.checkpoint import FilterInference
    from trkx.filter.model import FilterMLP
    from trkx.gnn.model import InteractionGNN
    from trkx.gnn.ops_factory import KernelChooser
    from trkx.tracks.builder.building import TrackBuilder

CHECKPOINT_FILES = {"embedding": "embedding.pt", "filter": "filter.pt", "gnn": "gnn.pt"}
#: ``stage -> (stage YAML, overrides)`` for embedding, filter, gnn and tracks.
StageConfigs = dict[str, tuple[Path, list[str]]]
#: The record fields the learned stages read (hit features, positions): the only ones moved to
#: the device. Ids, layers and truth are read by numpy code on the CPU and stay there.
DEVICE_FIELDS: tuple[str, ...] = ("x", "pos")


def tracks_config_path(config: str | os.PathLike, checkpoints: str | os.PathLike) -> Path:
    """The tracks config a trained pipeline builds with: the tuned ``tracks.yaml`` in its
    checkpoint folder (``trkx tune-tracks``'s, a shipped set's), else the pipeline's own
    ``config`` (whose tuned keys must then be set: trkx.tracks.stage_config)."""
    from trkx.stage_names import TUNED_TRACKS

    tuned = Path(checkpoints) / TUNED_TRACKS
    return tuned if tuned.is_file() else Path(config)


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
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    fused: bool = True

    @classmethod
    def load(cls, config: str | os.PathLike | None = None,
             checkpoints: str | os.PathLike | None = None,
             overrides: Sequence[str] = (),
             device: str | torch.device = "auto") -> TrainedPipeline:
        """The models of ``checkpoints`` (``embedding.pt``, ``filter.pt``, ``gnn.pt``) with the
        settings of the pipeline YAML ``config`` (and ``--set``-style ``overrides``); for the
        shipped models, chosen per event, :class:`trkx.pipeline.reconstruct.Reconstructor`. The
        models run on ``device``: ``auto`` (CUDA when available), ``cpu``, ``cuda`` or a
        ``torch.device`` (:mod:`trkx.runtime.device`; ``cuda`` without CUDA is a ConfigError)."""
        from trkx.pipeline.config import load_pipeline_config

        if config is None or checkpoints is None:
            raise ConfigError("TrainedPipeline.load needs a pipeline config and its checkpoints; "
                              "the shipped models are two sets chosen per event (cells or not): "
                              "trkx.pipeline.reconstruct.Reconstructor() runs them as trkx "
                              "infer does")

        target = resolve_device(device)       # before any loading: a bad device fails fast
        pipeline = load_pipeline_config(config, list(overrides))
        return cls.from_stage_configs(checkpoints, pipeline.stage_configs(), target,
                                      pipeline.inference.fused)

    @classmethod
    def from_stage_configs(cls, checkpoints: str | os.PathLike, stage_configs: StageConfigs,
                           device: str | torch.device = "auto",
                           fused: bool = True) -> TrainedPipeline:
        """Load the models onto ``device`` (:meth:`load`); ``stage_configs[stage] = (yaml
        path, overrides)`` give each stage's ``inference`` section and the tracks ``builder``.
        A null value there takes the checkpoint's working point; the builder is that of the
        tuned ``tracks.yaml`` in ``checkpoints`` when it has one (:func:`tracks_config_path`),
        with the tracks overrides. ``fused``: the filter's and the GNN's MLPs run
        fused on the CPU (trkx.runtime.fused_mlp; False: the plain modules)."""
        from trkx.embedding.checkpoint import load_model as load_embedding
        from trkx.embedding.inference import EmbeddingInference
        from trkx.filter.checkpoint import FilterInference
        from trkx.filter.checkpoint import load_model as load_filter
        from trkx.gnn.checkpoint import GNNInference
        from trkx.gnn.checkpoint import load_model as load_gnn
        from trkx.gnn.ops_factory import KernelChooser
        from trkx.tracks.stage_config import track_builder
        from trkx.training.data import EmbeddingData

        target = resolve_device(device)
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
        tracks_path, tracks_overrides = stage_configs["tracks"]
        builder = track_builder(tracks_config_path(tracks_path, checkpoints), tracks_overrides)
        try:
            filter_cut = filter_options.cut(filt)
        except ValueError as exc:
            raise ConfigError(f"{filter_label}: {exc}") from exc
        radius, k = embedding_options.working_point(emb.working_point)
        pipeline = cls(
            embedding=embedding.to(target), embedding_options=embedding_options, radius=radius,
            max_neighbours=k, use_cells=trained.use_cells, signal_pt_min=trained.signal_pt_min,
            filter=filter_net.to(target), filter_options=filter_options, filter_cut=filter_cut,
            gnn=gnn.to(target), gnn_precision=gnn_options.precision,
            graph_ops=gnn_options.kernel(gnn_checkpoint), builder=builder,
            chooser=KernelChooser(width=gnn.hidden, backward=False), device=target,
            fused=fused)
        pipeline.warm_up()
        return pipeline

    def warm_up(self, hits: int = 64) -> None:
        """Run every kernel of :meth:`run` once on a tiny random event of the real types and
        widths, so that one-off costs are paid with the models, not by the first event: numba's
        compiled graph and track kernels (loaded from its disk cache, once compiled) and its
        thread pool (~0.3-1 s in a fresh process, seconds more on the first-ever compile); on
        CUDA the BLAS, sparse and sort libraries' handles and the first launch of each kernel
        (dense layers, neighbour search and its layer mask, filter features and cell
        agreement, edge inputs and edge agreement, GNN sums), which otherwise cost the first
        event hundreds of milliseconds. All pairs of the tiny event are within reach (unit
        points, radius 2), so every stage sees edges; its GNN kernel choice is not kept."""
        with fused_inference(self.fused):
            self._warm_up(hits)

    def _warm_up(self, hits: int) -> None:
        from trkx.embedding.graph import build_edges
        from trkx.embedding.inference import embed, layer_key
        from trkx.filter.inference import score_edges as filter_scores
        from trkx.gnn.edge_inputs import model_edge_inputs
        from trkx.gnn.inference import score_edges

        record = warm_up_record(hits, self.use_cells, self.device)
        embed(self.embedding, record.x, precision=self.embedding_options.precision)
        dim = self.embedding.net[-1].out_features
        generator = torch.Generator().manual_seed(1)
        points = torch.nn.functional.normalize(torch.randn(hits, dim, generator=generator), dim=1)
        layer = layer_key(record) if self.embedding_options.other_layers_only else None
        record.edge_index = build_edges(points.to(self.device), 2.0, 4,
                                        self.embedding_options.backend, pos=record.pos,
                                        layer=layer)
        record.scores = filter_scores(self.filter, record, self.filter_options.chunk_size,
                                      self.filter_options.precision)
        gnn_scores = score_edges(self.gnn, record.x, record.edge_index, self.graph_ops,
                                 precision=self.gnn_precision,
                                 edge_attr=model_edge_inputs(self.gnn, record))
        graph = Record(edge_index=record.edge_index.cpu(),
                       scores=torch.full_like(gnn_scores, 0.9).cpu(), num_nodes=hits,
                       pos=record.pos.cpu(), volume_id=record.volume_id,
                       layer_id=record.layer_id)
        labels, table = self.builder.build_with_table(graph)
        self.track_parameters(graph, labels, table)   # the fit's and its errors' kernels
        synchronize(self.device)

    @property
    def precisions(self) -> dict[str, str]:
        """The precision of each learned stage's dense layers (trkx.runtime.precision)."""
        return {"embedding": self.embedding_options.precision,
                "filter": self.filter_options.precision, "gnn": self.gnn_precision}

    def run(self, record: Record, edge_labels: bool = False, stage_graphs: bool = True,
            ) -> tuple[dict[str, Record], np.ndarray, dict[str, float]]:
        """Graphs after each stage (on the CPU; with ``stage_graphs=False`` the GNN's alone,
        which track building needs: on a GPU the embedding graph's millions of edges then
        stay there), the track id of every hit, and seconds per stage (``embedding``,
        ``graph``, ``filter``, ``gnn``, ``tracks``; on CUDA each lap waits for the device's
        queued work, so a stage is charged its own kernels)."""
        graphs, labels, _, seconds = self.run_with_table(record, edge_labels, stage_graphs)
        return graphs, labels, seconds

    def run_with_table(self, record: Record, edge_labels: bool = False,
                       stage_graphs: bool = True,
                       ) -> tuple[dict[str, Record], np.ndarray, pd.DataFrame | None,
                                  dict[str, float]]:
        """:meth:`run`, and the builder's track table of the final tracks (None when its
        quality step did not run: :meth:`TrackBuilder.build_with_table`)."""
        with fused_inference(self.fused):
            return self._run_with_table(record, edge_labels, stage_graphs)

    @torch.no_grad()
    def _run_with_table(self, record: Record, edge_labels: bool, stage_graphs: bool,
                        ) -> tuple[dict[str, Record], np.ndarray, pd.DataFrame | None,
                                   dict[str, float]]:
        from trkx.embedding.inference import embedding_graph
        from trkx.filter.inference import filter_graph
        from trkx.gnn.edge_inputs import model_edge_inputs
        from trkx.gnn.inference import score_edges

        seconds: dict[str, float] = {}
        clock = time.perf_counter()

        def lap(name: str) -> None:
            nonlocal clock
            synchronize(self.device)
            now = time.perf_counter()
            seconds[name] = now - clock
            clock = now

        moved: dict[int, torch.Tensor] = {}
        on_device = to_device(record, self.device, DEVICE_FIELDS, moved)
        embedded = embedding_graph(self.embedding, on_device, self.radius, self.max_neighbours,
                                   self.embedding_options.backend,
                                   self.embedding_options.precision, edge_labels, lap,
                                   self.embedding_options.other_layers_only)
        clock = time.perf_counter()          # labelling is evaluation, not inference
        filtered = filter_graph(self.filter, embedded, self.filter_cut,
                                self.filter_options.chunk_size, self.filter_options.precision)
        lap("filter")
        scored = copy.copy(filtered)         # shallow: only the scores are new
        scored.scores = score_edges(self.gnn, filtered.x, filtered.edge_index.long(),
                                    self.graph_ops, self.chooser, precision=self.gnn_precision,
                                    edge_attr=model_edge_inputs(self.gnn, filtered))
        lap("gnn")
        # Track building is numba/numpy on the CPU: every graph comes back once (each tensor
        # once: the stages share the hit tensors); on the CPU nothing moves.
        cpu = torch.device("cpu")
        back = {id(moved[id(t)]): t for t in record.to_dict().values()
                if isinstance(t, torch.Tensor) and id(t) in moved}   # the originals serve
        stages = (("embedding", embedded), ("filter", filtered)) if stage_graphs else ()
        graphs = {name: to_device(graph, cpu, None, back)
                  for name, graph in (*stages, ("gnn", scored))}
        labels, table = self.builder.build_with_table(graphs["gnn"])
        lap("tracks")
        return graphs, labels, table, seconds

    def event_tracks(self, detector: Any, prefix: str | os.PathLike,
                     graphs_with_truth: bool = False, stage_graphs: bool | None = None
                     ) -> EventTracks:
        """Read the event ``prefix``, run the pipeline, fit the tracks. ``graphs_with_truth``
        returns every stage's graph with its edge labels (the truth is read for them; the tracks
        never read it); without it, the GNN's graph alone, unless ``stage_graphs`` asks for every
        stage's graph without truth (what a benchmark counts the edges of)."""
        from trkx.data.events import event_record
        from trkx.tracks.builder.track_labels import tracks_frame

        start = time.perf_counter()
        record = event_record(str(prefix), detector, self.use_cells, self.signal_pt_min,
                              with_truth=graphs_with_truth)
        seconds = {"load": time.perf_counter() - start}
        graphs, labels, table, laps = self.run_with_table(
            record, edge_labels=graphs_with_truth,
            stage_graphs=graphs_with_truth if stage_graphs is None else stage_graphs)
        seconds.update(laps)
        start = time.perf_counter()
        parameters = self.track_parameters(graphs["gnn"], labels, table)
        seconds["parameters"] = time.perf_counter() - start
        event_id = int(record.event_id)
        return EventTracks(event_id, graphs, tracks_frame(record.hit_id, labels, event_id),
                           parameters, seconds, int(record.num_nodes))

    def track_parameters(self, graph: Record, labels: np.ndarray,
                         table: pd.DataFrame | None = None) -> pd.DataFrame:
        """Each track's helix parameters, chi2 / ndf, quality score and errors
        (trkx.tracks.builder.parameters), from the GNN graph and the track ids :meth:`run` returned
        (``table``: :meth:`run_with_table`'s, when it gave one: no second fit)."""
        from trkx.tracks.builder.parameters import track_parameters

        return track_parameters(graph, labels, self.builder, table)


@dataclass(frozen=True, eq=False)
class EventTracks:
    """What one event gives: its record's graphs after each stage (the GNN's alone unless asked
    for: :meth:`TrainedPipeline.event_tracks`), the tracks, the track parameters, seconds per stage
    (``load`` ... ``parameters``) and the hit count."""

    event_id: int
    graphs: dict[str, Any]
    tracks: pd.DataFrame
    parameters: pd.DataFrame
    seconds: dict[str, float]
    n_hits: int


def warm_up_record(hits: int, use_cells: bool, device: torch.device) -> Record:
    """A random event of ``hits`` hits with a real record's fields and feature columns (the
    cell features when ``use_cells``): positions (r, phi, z) in the detector's range, four
    barrel layers; ``x`` and ``pos`` on ``device`` (:data:`DEVICE_FIELDS`)."""
    from trkx.data.features import CELL_FEATURES, FEATURE_SCALES, POSITION_FEATURES

    generator = torch.Generator().manual_seed(0)
    names = list(POSITION_FEATURES) + (list(CELL_FEATURES) if use_cells else [])
    pos = torch.rand(hits, 3, generator=generator) * torch.tensor([1000.0, 6.0, 2000.0])
    pos[:, 1] -= 3.0
    pos[:, 2] -= 1000.0
    x = torch.rand(hits, len(names), generator=generator)
    x[:, :3] = pos / torch.tensor([FEATURE_SCALES[n] for n in POSITION_FEATURES])
    layers = torch.arange(hits) % 4
    return Record(x=x.to(device), pos=pos.to(device), feature_names=names, num_nodes=hits,
                volume_id=torch.full((hits,), 8), layer_id=2 * layers + 2)


def to_device(record: Record, device: torch.device, fields: Sequence[str] | None,
              moved: dict[int, torch.Tensor]) -> Record:
    """A shallow copy of ``record`` with its tensors ``fields`` (all when None) on ``device``;
    the others, and the tensors already there, are shared, not copied. ``moved`` maps
    ``id(tensor)`` to its copy on the device, so a tensor shared by several records moves once
    (the caller keeps the originals alive while it uses the map)."""
    out = copy.copy(record)
    for key, value in record.to_dict().items():
        if (fields is not None and key not in fields) or not isinstance(value, torch.Tensor) \
                or value.device == device:
            continue
        if id(value) not in moved:
            moved[id(value)] = value.to(device)
        out[key] = moved[id(value)]
    return out
