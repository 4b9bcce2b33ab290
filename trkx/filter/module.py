"""``FilterModule``: Lightning training of the edge filter.

Each step draws ``edge_batch`` random edges of one event graph (so a 2M-edge event fits in
memory) and minimises the weighted binary cross-entropy

    L = sum_e w_e BCE(logit_e, t_e) / sum_e w_e,
    t_e = y(e) (truth-graph edge: what the GNN learns next; ``target="y_pid"``: same particle),
    w_e = signal_weight * (secondary_weight if r(e) > 1 mm) if signal(e),
          pos_weight if t_e and not signal(e), 1 otherwise,

where r(e) is the production radius of the particle of the edge's first hit (the secondaries,
7% of the signal, are otherwise learned as rarely as they occur; 1: off). With
``z_shift_sigma`` each training event is first moved along the beam by dz ~ N(0, sigma^2) mm
(trkx.edges.augment), so the filter does not learn the luminous region's extent as a prior.
Trained with AdamW and a linear warm-up + cosine learning-rate schedule in steps
(trkx.stages.schedules).

Working point: validation scores every edge of its events (chunked) and chooses the cut that
keeps ``target_efficiency`` of the signal edges the filter receives (trkx.edges.working_point),
raised when needed so that it keeps at most ``max_edges_per_hit`` edges per hit over the
validation events (null: no bound; the bound wins over the efficiency target); it logs, at
that cut, the efficiency, the share of fake edges removed (rejection), purity and edges per hit.
``working_point()`` hands the cut to the checkpoint; a fixed ``score_cut`` overrides it.

With a ``teacher`` (a trained filter's model file, e.g. a shipped set's ``filter.pt``) the
training loss's target is ``(1 - a) t_e + a sigmoid(l_e)``, ``a = distill_weight`` and ``l_e``
the teacher's logit of the same edge (from its own edge features): since the BCE is linear in
its target this is ``(1 - a) BCE(t) + a BCE(sigmoid(l))``, so a narrower filter learns the
shipped one's ranking of the edges, not only the truth (knowledge distillation). The weights
``w_e`` and every validation figure stay on the truth.
"""

from __future__ import annotations

import numpy as np
import pytorch_lightning as pl
import torch

from trkx.data.record_type import Record
from trkx.edges.augment import random_shift
from trkx.edges.figures import (
    edge_purity,
    kept_edges,
    origin_counts,
    origin_efficiencies,
    secondary_edges,
)
from trkx.edges.loss import edge_weights, weighted_bce
from trkx.edges.working_point import cut_for_edges_per_hit, cut_for_efficiency
from trkx.filter.features import edge_features
from trkx.filter.inference import score_edges
from trkx.filter.model import FilterMLP
from trkx.stages.schedules import adamw_warmup_cosine, check_horizon, total_steps

TARGETS = ("y", "y_pid")


def filter_metrics(record: Record, scores: torch.Tensor, score_cut: float) -> dict[str, float]:
    """Efficiency on signal edges, rejection of fake edges, purity and kept edges per hit."""
    keep = scores.to(record.signal.device) >= score_cut
    signal, true = record.signal.bool(), record.y_pid.bool()
    return {
        "signal_efficiency": float((keep & signal).sum()) / max(int(signal.sum()), 1),
        "fake_rejection": float((~keep & ~true).sum()) / max(int((~true).sum()), 1),
        "purity": edge_purity(keep, record.y),
        "edges_per_hit": float(keep.sum()) / max(int(record.num_nodes), 1),
    }


#: Edges scored at once in validation (memory bound, not a setting: results do not depend on it).
VALIDATION_CHUNK = 500_000


class FilterModule(pl.LightningModule):
    """Training of the edge filter ``model``; every other argument is a key of the config's
    ``module`` section (configs/filter.yaml). Random edge batches are drawn from a generator
    seeded from torch's seed, which the training driver sets from ``trainer.seed``."""

    def __init__(self, model: FilterMLP, edge_batch: int = 200_000, signal_weight: float = 3.0,
                 pos_weight: float = 1.0, learning_rate: float = 1e-3,
                 weight_decay: float = 0.0, score_cut: float | None = None,
                 target_efficiency: float = 0.99, target: str = "y",
                 lr_warmup_steps: int = 50, max_edges_per_hit: float | None = None,
                 lr_horizon_steps: int | None = None, secondary_weight: float = 1.0,
                 z_shift_sigma: float = 0.0, teacher: str | None = None,
                 distill_weight: float = 0.5) -> None:
        super().__init__()
        check_horizon(lr_horizon_steps)
        if z_shift_sigma < 0:
            raise ValueError(f"z_shift_sigma must be >= 0 (mm), got {z_shift_sigma}")
        if secondary_weight <= 0:
            raise ValueError(f"secondary_weight must be > 0, got {secondary_weight}")
        if edge_batch < 1 or (score_cut is not None and not 0.0 <= score_cut <= 1.0):
            raise ValueError("edge_batch must be >= 1 and score_cut in [0, 1] or null")
        if not 0.0 < target_efficiency <= 1.0:
            raise ValueError(f"target_efficiency must lie in (0, 1], got {target_efficiency}")
        if max_edges_per_hit is not None and max_edges_per_hit <= 0:
            raise ValueError(f"max_edges_per_hit must be > 0 or null, got {max_edges_per_hit}")
        if target not in TARGETS:
            raise ValueError(f"target {target!r} is not one of {', '.join(TARGETS)}")
        if not 0.0 <= distill_weight <= 1.0:
            raise ValueError(f"distill_weight must lie in [0, 1], got {distill_weight}")
        self.save_hyperparameters(ignore=["model"])
        self._teacher: tuple = ()     # (network,) once loaded: a tuple, so never a submodule
        self.network = model
        self._rng = np.random.default_rng(torch.initial_seed())
        self._val_scores: list[torch.Tensor] = []
        self._val_records: list[Record] = []
        self.chosen_cut: float | None = score_cut

    def teacher_network(self) -> FilterMLP | None:
        """The frozen teacher (loaded once, on this module's device), or None."""
        if self.hparams.get("teacher") is None:
            return None
        if not self._teacher:
            from trkx.filter.checkpoint import load_model

            network, _ = load_model(self.hparams.teacher)
            network.requires_grad_(False)
            self._teacher = (network.to(self.device).eval(),)
        return self._teacher[0]

    def _logits(self, network: FilterMLP, record: Record, edge_index: torch.Tensor,
                ) -> torch.Tensor:
        names = getattr(record, "feature_names", None) if network.cell_agreement else None
        return network(edge_features(record.x, record.pos, edge_index, names,
                                     network.hit_features, network.trajectory))

    def _distilled(self, target: torch.Tensor, record: Record, edge_index: torch.Tensor,
                   ) -> torch.Tensor:
        """The training target mixed with the teacher's scores (module docstring)."""
        teacher, share = self.teacher_network(), self.hparams.get("distill_weight", 0.5)
        if teacher is None or share == 0.0:
            return target
        with torch.no_grad():
            scores = torch.sigmoid(self._logits(teacher, record, edge_index).float())
        return (1.0 - share) * target.float() + share * scores

    def edge_loss(self, record: Record, edges: torch.Tensor | None = None,
                  distill: bool = False) -> torch.Tensor:
        """The weighted BCE over ``edges`` (indices into the record's edges; None: all), its
        target mixed with the teacher's scores when ``distill`` and a teacher is set."""
        edge_index = record.edge_index if edges is None else record.edge_index[:, edges]
        labels = getattr(record, self.hparams.target)
        target = labels if edges is None else labels[edges]
        signal = record.signal if edges is None else record.signal[edges]
        logits = self._logits(self.network, record, edge_index)
        secondary_weight = self.hparams.get("secondary_weight", 1.0)
        radius = None
        if secondary_weight != 1.0:
            if getattr(record, "production_radius", None) is None:
                raise ValueError("module.secondary_weight needs the hits' truth "
                                 "production_radius in each training record (records with truth)")
            radius = record.production_radius[edge_index[0]]
        weights = edge_weights(target, signal, self.hparams.signal_weight,
                               self.hparams.pos_weight, 1.0, signal_radius=radius,
                               secondary_weight=secondary_weight)
        if distill:
            target = self._distilled(target, record, edge_index)
        return weighted_bce(logits, target, weights)

    def sample_edges(self, n_edges: int) -> torch.Tensor | None:
        if n_edges <= self.hparams.edge_batch:
            return None
        return torch.from_numpy(self._rng.choice(n_edges, self.hparams.edge_batch,
                                                 replace=False))

    def training_step(self, record: Record, batch_idx: int) -> torch.Tensor:
        record = random_shift(record, self.hparams.get("z_shift_sigma", 0.0))
        loss = self.edge_loss(record, self.sample_edges(record.edge_index.shape[1]),
                              distill=True)
        self.log("train_loss", loss, prog_bar=True, batch_size=1)
        return loss

    def scores(self, record: Record) -> torch.Tensor:
        return score_edges(self.network, record, VALIDATION_CHUNK)

    def validation_step(self, record: Record, batch_idx: int) -> None:
        # The loss over every edge (not a random batch): validation figures must not vary.
        self.log("val_loss", self.edge_loss(record), batch_size=1)
        self._val_scores.append(self.scores(record).cpu())
        self._val_records.append(record)

    def on_validation_epoch_end(self) -> None:
        if not self._val_scores:
            return
        scores, records = self._val_scores, self._val_records
        self._val_scores, self._val_records = [], []
        signal = torch.cat([s[r.signal.bool().cpu()] for s, r in zip(scores, records)])
        cut = (self.hparams.score_cut if self.hparams.score_cut is not None
               else cut_for_efficiency(signal, self.hparams.target_efficiency))
        bound = self.hparams.get("max_edges_per_hit")
        if self.hparams.score_cut is None and bound is not None:
            hits = sum(int(r.num_nodes) for r in records)
            cut = max(cut, cut_for_edges_per_hit(torch.cat(scores), hits, bound))
        self.chosen_cut = cut
        pooled = [filter_metrics(r, s, cut) for s, r in zip(scores, records)]
        weights = [max(int(r.signal.sum()), 1) for r in records]
        for key in pooled[0]:
            value = sum(m[key] * w for m, w in zip(pooled, weights)) / sum(weights)
            self.log(f"val_{key}", value, prog_bar=key in ("signal_efficiency", "edges_per_hit"))
        self.log("val_score_cut", cut)
        counts = []
        for s, r in zip(scores, records):
            secondary = secondary_edges(r)
            if secondary is not None:
                counts.append(origin_counts(kept_edges(s.to(r.signal.device), cut), r.signal,
                                            secondary))
        if counts:     # signal efficiency of the prompt and the secondary particles' edges
            for key, value in origin_efficiencies(counts).items():
                self.log(f"val_signal_{key}", value)

    def working_point(self) -> dict[str, float]:
        """The score cut chosen on the validation events (kept in the checkpoint)."""
        if self.chosen_cut is None:
            raise RuntimeError("the filter has no working point: it needs validation events")
        return {"score_cut": float(self.chosen_cut)}

    def configure_optimizers(self):
        return adamw_warmup_cosine(self.parameters(), self.hparams.learning_rate,
                                   self.hparams.weight_decay, self.hparams.lr_warmup_steps,
                                   total_steps(self, self.hparams.lr_horizon_steps))
