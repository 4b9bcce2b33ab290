"""``EmbeddingModule``: Lightning training of the embedding (what; the Trainer is the how).

A training step takes one event record, embeds all its hits, draws the pairs of
:mod:`trkx.embedding.pairs` and minimises the hinge loss. Validation builds the graph at the
working point (``radius``, ``max_neighbours``) and logs edge efficiency, purity and edges per
hit (:mod:`trkx.embedding.labels`). With ``z_shift_sigma`` each training event is first moved
along the beam by dz ~ N(0, sigma^2) mm (trkx.edges.augment), as the filter's and the GNN's are,
so the embedding does not learn the luminous region's extent as a prior either.

Working point: validation also measures the embedding distance of every signal truth pair and
chooses the radius that contains ``target_efficiency`` of them,

    radius* = min { r : #{signal pairs with |e_i - e_j| <= r} >= target * #{signal pairs} },

which ``working_point()`` hands to the checkpoint (a fixed ``radius`` is used while training
and when ``target_efficiency`` is null). The learning rate warms up for ``lr_warmup_steps``
then decays on a cosine over the step budget (``lr_step > 0`` keeps the older step decay).
"""

from __future__ import annotations

import numpy as np
import pytorch_lightning as pl
import torch

from trkx.data.record_type import Record
from trkx.edges.augment import random_shift
from trkx.edges.working_point import cut_for_efficiency
from trkx.embedding.graph import build_edges
from trkx.embedding.labels import graph_metrics, label_edges
from trkx.embedding.model import EmbeddingMLP
from trkx.embedding.pairs import hard_negative_pairs, hinge_loss, pair_labels, random_pairs
from trkx.stages.schedules import adamw_warmup_cosine, check_horizon, total_steps


def phi_sector(record: Record, sectors: int, generator: np.random.Generator) -> Record:
    """The hits of one random azimuthal wedge of width 2 pi / sectors, truth graph restricted.

    Training on wedges keeps the local hit density (hence the hard negatives) of a full event
    at 1/sectors of the cost.
    """
    centre = generator.uniform(-np.pi, np.pi)
    dphi = torch.remainder(record.pos[:, 1] - centre + np.pi, 2 * np.pi) - np.pi
    keep = dphi.abs() < np.pi / sectors
    device = record.pos.device
    new_index = torch.full((int(record.num_nodes),), -1, dtype=torch.int64, device=device)
    new_index[keep] = torch.arange(int(keep.sum()), device=device)
    edges = new_index[record.track_edges]
    sub = Record(x=record.x[keep], pos=record.pos[keep], particle_id=record.particle_id[keep],
               signal_hit=record.signal_hit[keep],
               track_edges=edges[:, (edges >= 0).all(dim=0)])
    radius = getattr(record, "production_radius", None)
    if radius is not None:
        sub.production_radius = radius[keep]
    sub.num_nodes = int(keep.sum())
    return sub


class EmbeddingModule(pl.LightningModule):
    """Metric-learning training of the embedding ``model``; every other argument is a key of
    the config's ``module`` section (configs/embedding.yaml). Pairs and wedges are drawn from a
    generator seeded from torch's seed, which the training driver sets from ``trainer.seed``.
    Validation graphs are built with the exact default backend (``auto``)."""

    def __init__(self, model: EmbeddingMLP, margin: float = 0.1, radius: float = 0.1,
                 max_neighbours: int = 32, mining_neighbours: int = 20,
                 mining_queries: int | None = None, random_pairs_per_hit: float = 2.0,
                 signal_weight: float = 3.0, learning_rate: float = 1e-3,
                 weight_decay: float = 0.0, lr_step: int = 0, lr_gamma: float = 0.5,
                 train_sectors: int = 1, target_efficiency: float | None = 0.995,
                 lr_warmup_steps: int = 50, lr_horizon_steps: int | None = None,
                 secondary_weight: float = 1.0, z_shift_sigma: float = 0.0) -> None:
        super().__init__()
        check_horizon(lr_horizon_steps)
        if z_shift_sigma < 0:
            raise ValueError(f"z_shift_sigma must be >= 0 (mm), got {z_shift_sigma}")
        if secondary_weight <= 0:
            raise ValueError(f"secondary_weight must be > 0, got {secondary_weight}")
        if margin <= 0 or radius <= 0:
            raise ValueError("margin and radius must be > 0")
        if train_sectors < 1:
            raise ValueError(f"train_sectors must be >= 1, got {train_sectors}")
        self.save_hyperparameters(ignore=["model"])
        if target_efficiency is not None and not 0.0 < target_efficiency <= 1.0:
            raise ValueError(f"target_efficiency must lie in (0, 1], got {target_efficiency}")
        self.network = model
        self._rng = np.random.default_rng(torch.initial_seed())
        self._val_distances: list[torch.Tensor] = []
        self.chosen_radius: float = radius

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.network(x)

    def pairs(self, record: Record, embedding: torch.Tensor) -> torch.Tensor:
        """All training pairs of one event: truth graph, random pairs, hard negatives."""
        hp = self.hparams
        parts = [record.track_edges.cpu(),
                 random_pairs(embedding.shape[0], hp.random_pairs_per_hit, self._rng),
                 hard_negative_pairs(embedding.cpu(), hp.margin, hp.mining_neighbours,
                                     hp.mining_queries, self._rng)]
        return torch.cat(parts, dim=1).to(embedding.device)

    def event_loss(self, record: Record) -> torch.Tensor:
        embedding = self(record.x)
        pairs = self.pairs(record, embedding)
        positive, weight = pair_labels(pairs, record.particle_id, record.signal_hit,
                                       self.hparams.signal_weight,
                                       getattr(record, "production_radius", None),
                                       self.hparams.get("secondary_weight", 1.0))
        return hinge_loss(embedding, pairs, positive, weight.to(embedding.device),
                          self.hparams.margin)

    def training_step(self, record: Record, batch_idx: int) -> torch.Tensor:
        record = random_shift(record, self.hparams.get("z_shift_sigma", 0.0))
        if self.hparams.train_sectors > 1:
            record = phi_sector(record, self.hparams.train_sectors, self._rng)
        loss = self.event_loss(record)
        self.log("train_loss", loss, prog_bar=True, batch_size=1)
        return loss

    @torch.no_grad()
    def build_graph(self, record: Record) -> torch.Tensor:
        """Candidate edges of one event at the working point."""
        return build_edges(self(record.x), self.hparams.radius, self.hparams.max_neighbours,
                           "auto", pos=record.pos)

    def validation_step(self, record: Record, batch_idx: int) -> None:
        edges = self.build_graph(record)
        labelled = record.clone()
        labelled.edge_index = edges.cpu()
        labelled.y, labelled.y_pid, labelled.signal = label_edges(record, edges)
        metrics = graph_metrics(labelled)
        self._val_distances.append(self.signal_pair_distances(record))
        if self.hparams.train_sectors > 1:  # the loss of a fixed wedge keeps validation cheap
            record = phi_sector(record, self.hparams.train_sectors, np.random.default_rng(0))
        self.log("val_loss", self.event_loss(record), batch_size=1)
        for key in ("edge_efficiency", "purity", "edges_per_hit"):
            self.log(f"val_{key}", metrics[key], prog_bar=True, batch_size=1)
        for key in ("edge_efficiency_prompt", "edge_efficiency_secondary"):
            if key in metrics:       # records with production radii: the split by origin
                self.log(f"val_{key}", metrics[key], batch_size=1)

    @torch.no_grad()
    def signal_pair_distances(self, record: Record) -> torch.Tensor:
        """Embedding distances |e_i - e_j| of the record's signal truth-graph pairs."""
        edges = record.track_edges
        signal = record.signal_hit.bool()
        edges = edges[:, signal[edges[0]] & signal[edges[1]]]
        embedding = self(record.x)
        return (embedding[edges[0]] - embedding[edges[1]]).norm(dim=1).cpu()

    def on_validation_epoch_start(self) -> None:
        self._val_distances = []

    def on_validation_epoch_end(self) -> None:
        if self.hparams.target_efficiency is None or not self._val_distances:
            return
        distances = torch.cat(self._val_distances)
        self.chosen_radius = -cut_for_efficiency(-distances, self.hparams.target_efficiency)
        self.log("val_radius", self.chosen_radius)

    def working_point(self) -> dict[str, float]:
        """The radius chosen on the validation events (the trained one without them)."""
        return {"radius": float(self.chosen_radius)}

    def configure_optimizers(self):
        if self.hparams.lr_step <= 0:
            return adamw_warmup_cosine(self.parameters(), self.hparams.learning_rate,
                                       self.hparams.weight_decay, self.hparams.lr_warmup_steps,
                                       total_steps(self, self.hparams.lr_horizon_steps))
        optimiser = torch.optim.AdamW(self.parameters(), lr=self.hparams.learning_rate,
                                      weight_decay=self.hparams.weight_decay)
        schedule = torch.optim.lr_scheduler.StepLR(optimiser, self.hparams.lr_step,
                                                   self.hparams.lr_gamma)
        return {"optimizer": optimiser, "lr_scheduler": schedule}
