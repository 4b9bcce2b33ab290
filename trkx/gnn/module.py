"""``GNNModule``: training and validation of the interaction network (Lightning).

Each step is one event graph, or one sampled minibatch (:mod:`trkx.gnn.sampling`) whose loss
counts only the edges of its ``target_edge_mask``. The loss is the weighted BCE of
:mod:`trkx.edges.loss`; validation pools all events of the epoch and logs ``val_loss``,
``val_efficiency`` (signal edges kept), ``val_purity`` (true among kept) and ``val_auc`` at
``edge_cut``.

With a ``teacher`` (a trained GNN's model file) the loss also fits that network's scores on
the same minibatch (knowledge distillation): the BCE's target is ``(1 - a) y + a sigmoid(t)``
with ``a = distill_weight`` and ``t`` the teacher's logits, which equals ``(1 - a) BCE(y) +
a BCE(sigmoid(t))`` since the BCE is linear in its target. A smaller network so learns the
shipped one's decisions, not only the truth. The validation metrics stay on the truth.

The learning rate warms up linearly for ``lr_warmup_steps`` and decays on a cosine to the end
of the step budget (trkx.stages.schedules; ``lr_step_size > 0`` keeps the older step decay).

The checkpoint's working point is the edge cut (``edge_cut``); the track builder's working
point is chosen afterwards on the GNN's scores of the validation events, by
``trkx tune-tracks`` (trkx.tracks.tune.tune_tracks).
"""

from __future__ import annotations

import pytorch_lightning as pl
import torch
from torch import Tensor

from trkx.data.record import NHITS, PRODUCTION_RADIUS, PT
from trkx.data.record_type import Record
from trkx.data.truth import SignalCuts
from trkx.edges.augment import random_shift
from trkx.edges.figures import kept_edges, origin_counts, origin_efficiencies, secondary_edges
from trkx.edges.loss import edge_weights, weighted_bce
from trkx.gnn.edge_inputs import model_edge_inputs
from trkx.gnn.metrics import edge_metrics
from trkx.gnn.model import InteractionGNN
from trkx.gnn.ops_factory import GRAPH_OPS_CHOICES, KernelChooser, build_graph_ops
from trkx.stages.schedules import adamw_warmup_cosine, check_horizon, total_steps


class GNNModule(pl.LightningModule):
    """Trains an :class:`InteractionGNN` edge classifier.

    Args:
        model: the network (built from the ``model`` config section).
        graph_ops: local kernel, ``"csr"``, ``"scatter"`` or ``"auto"``.
        learning_rate: AdamW learning rate.
        weight_decay: AdamW weight decay.
        lr_step_size: epochs between learning-rate decays (0: constant rate).
        lr_gamma: factor of each decay.
        signal_weight: loss weight of signal truth edges.
        true_weight: loss weight of other truth edges.
        fake_weight: loss weight of fake edges.
        signal_pt_power: a signal edge's weight is ``signal_weight * min(pT, signal_pt_cap)^p``
            (pT in GeV, of the edge's first hit; 0: no pT factor; trkx.edges.loss). The
            validation metrics keep the plain class weights, so runs stay comparable.
        signal_pt_cap: the pT (GeV) above which the factor stops growing.
        secondary_weight: factor on the weight of secondary particles' signal edges
            (production radius > 1 mm; trkx.edges.loss); 1: off.
        signal_pt_min: the loss's signal threshold (GeV): with a value, the edges the loss
            weighs as signal are the true edges (``y``) of particles of pT >= this and at
            least trkx.data.truth.SignalCuts.min_hits hits (the records' ``signal`` flag is
            pT >= 1 GeV; the anchors count pT > 0.9, trkx.tracks.evaluate.anchors); the validation's
            efficiency and purity still count the records' flag. None: the records' flag.
        edge_cut: score above which an edge is kept: the validation metrics' cut and the
            checkpoint's working point.
        lr_warmup_steps: linear warm-up steps of the cosine schedule.
        z_shift_sigma: width (mm) of the normal distribution from which each training step
            draws a shift of the whole graph along the beam (trkx.edges.augment); 0: off.
        lr_horizon_steps: the step at which the cosine schedule reaches its floor (None: the
            step budget; fix it for a run that resumes under growing budgets).
        teacher: a GNN model file (``trkx train gnn`` output, e.g. a shipped set's ``gnn.pt``)
            whose scores the training loss also fits (module docstring); None: the truth alone.
            Loaded at the first training step, frozen, never saved with this network.
        distill_weight: the teacher's share ``a`` of the loss's target, in [0, 1].
        focal_gamma: the training loss's focal factor ``|target - score|^gamma``
            (trkx.edges.loss; 0: off); the validation loss stays the plain weighted BCE, so
            runs with and without it compare.
    """

    def __init__(self, model: InteractionGNN, graph_ops: str = "auto",
                 learning_rate: float = 1e-3, weight_decay: float = 0.0,
                 lr_step_size: int = 0, lr_gamma: float = 0.5, signal_weight: float = 2.0,
                 true_weight: float = 1.0, fake_weight: float = 1.0,
                 edge_cut: float = 0.5, lr_warmup_steps: int = 50,
                 lr_horizon_steps: int | None = None, signal_pt_power: float = 0.0,
                 signal_pt_cap: float = 10.0, secondary_weight: float = 1.0,
                 z_shift_sigma: float = 0.0, signal_pt_min: float | None = None,
                 teacher: str | None = None, distill_weight: float = 0.5,
                 focal_gamma: float = 0.0) -> None:
        super().__init__()
        self.save_hyperparameters(ignore=["model"])
        if graph_ops not in GRAPH_OPS_CHOICES:
            raise ValueError(f"graph_ops {graph_ops!r} is not one of "
                             f"{', '.join(GRAPH_OPS_CHOICES)}")
        if not 0.0 < edge_cut < 1.0:
            raise ValueError(f"edge_cut must lie in (0, 1), got {edge_cut}")
        if min(signal_weight, true_weight, fake_weight) < 0:
            raise ValueError("edge weights must be >= 0")
        if signal_pt_power < 0 or signal_pt_cap < 1:
            raise ValueError(f"signal_pt_power must be >= 0 and signal_pt_cap >= 1 GeV, got "
                             f"{signal_pt_power} and {signal_pt_cap}")
        self.model = model
        self.graph_ops = graph_ops
        self.learning_rate = learning_rate
        self.weight_decay = weight_decay
        self.lr_step_size = lr_step_size
        self.lr_gamma = lr_gamma
        self.signal_weight = signal_weight
        self.true_weight = true_weight
        self.fake_weight = fake_weight
        self.signal_pt_power = signal_pt_power
        self.signal_pt_cap = signal_pt_cap
        if secondary_weight <= 0:
            raise ValueError(f"secondary_weight must be > 0, got {secondary_weight}")
        self.secondary_weight = secondary_weight
        if signal_pt_min is not None and not signal_pt_min > 0:
            raise ValueError(f"signal_pt_min must be > 0 GeV or null, got {signal_pt_min}")
        self.signal_pt_min = signal_pt_min
        if z_shift_sigma < 0:
            raise ValueError(f"z_shift_sigma must be >= 0 (mm), got {z_shift_sigma}")
        self.z_shift_sigma = z_shift_sigma
        if not 0.0 <= distill_weight <= 1.0:
            raise ValueError(f"distill_weight must lie in [0, 1], got {distill_weight}")
        self.teacher = teacher
        self.distill_weight = distill_weight
        if focal_gamma < 0:
            raise ValueError(f"focal_gamma must be >= 0, got {focal_gamma}")
        self.focal_gamma = focal_gamma
        self._teacher: tuple = ()     # (network,) once loaded: a tuple, so never a submodule
        self.edge_cut = edge_cut
        self.lr_warmup_steps = lr_warmup_steps
        check_horizon(lr_horizon_steps)
        self.lr_horizon_steps = lr_horizon_steps
        self.chooser = KernelChooser(width=model.hidden)
        self._val_outputs: list[tuple[Tensor, Tensor, Tensor, Tensor]] = []
        self._val_origin: list[dict[str, int]] = []

    def forward(self, data: Record) -> Tensor:
        """Edge logits [E] of one event graph."""
        return self._logits(self.model, data, self._graph_ops(data))

    def _graph_ops(self, data: Record):
        # A graph-parallel strategy hands each rank its block with distributed ops attached.
        return getattr(data, "graph_ops", None) or build_graph_ops(
            data.edge_index, data.num_nodes, self.graph_ops, self.chooser)

    @staticmethod
    def _logits(model: InteractionGNN, data: Record, ops) -> Tensor:
        # a block has no whole-event edge_index: the strategy computed its edge_inputs
        inputs = (data.edge_inputs if "edge_inputs" in data
                  else model_edge_inputs(model, data))
        return model(data.x, ops, inputs)

    def teacher_network(self) -> InteractionGNN | None:
        """The frozen teacher (loaded once, on this module's device), or None."""
        if self.teacher is None:
            return None
        if not self._teacher:
            from trkx.gnn.checkpoint import load_model

            network, _ = load_model(self.teacher)
            network.requires_grad_(False)
            self._teacher = (network.to(self.device).eval(),)
        return self._teacher[0]

    def _target(self, data: Record, ops) -> Tensor:
        """The loss's target: the truth ``y``, mixed with the teacher's scores when one is set."""
        teacher = self.teacher_network()
        if teacher is None or self.distill_weight == 0.0:
            return data.y
        if "edge_inputs" in data and teacher.edge_features != self.model.edge_features:
            raise ValueError("module.teacher: a graph block carries the student's edge inputs "
                             "only; the teacher must take the same edge_features")
        with torch.no_grad():
            scores = torch.sigmoid(self._logits(teacher, data, ops).float())
        return (1.0 - self.distill_weight) * data.y.float() + self.distill_weight * scores

    def edge_loss_normaliser(self, data: Record) -> float:
        """Denominator of the weighted BCE (GraphParallelStrategy rescales the loss by it)."""
        return float(self._weights(data).sum())

    def _weights(self, data: Record) -> Tensor:
        """The loss weights (with the pT factor when ``signal_pt_power > 0``, the secondary
        factor when ``secondary_weight != 1``)."""
        if self.signal_pt_power <= 0 and self.secondary_weight == 1.0:
            return self._class_weights(data)
        for key, name, used in ((PT, "signal_pt_power", self.signal_pt_power > 0),
                                (PRODUCTION_RADIUS, "secondary_weight",
                                 self.secondary_weight != 1.0)):
            if used and (getattr(data, key, None) is None or "edge_index" not in data):
                raise ValueError(f"module.{name} needs the hits' truth {key} and the edge_index"
                                 " in each training graph (records with truth, not a graph "
                                 "block)")
        first = data.edge_index[0]
        radius = data[PRODUCTION_RADIUS][first] if self.secondary_weight != 1.0 else None
        return edge_weights(data.y, self._signal(data), self.signal_weight, self.true_weight,
                            self.fake_weight,
                            data[PT][first] if self.signal_pt_power > 0 else None,
                            self.signal_pt_power, self.signal_pt_cap, radius,
                            self.secondary_weight)

    def _class_weights(self, data: Record) -> Tensor:
        """The weights of the validation metrics: signal / other true / fake only."""
        return edge_weights(data.y, self._signal(data), self.signal_weight, self.true_weight,
                            self.fake_weight)

    def _signal(self, data: Record) -> Tensor:
        """[E] bool: the signal edges of the loss (the records' flag, or with
        ``signal_pt_min`` the true edges of particles of pT >= it and enough hits)."""
        if self.signal_pt_min is None:
            return data.signal
        for key in (PT, NHITS):
            if getattr(data, key, None) is None or "edge_index" not in data:
                raise ValueError(f"module.signal_pt_min needs the hits' truth {key} and the "
                                 "edge_index in each training graph (records with truth)")
        first = data.edge_index[0]
        return (data.y.bool() & (data[PT][first] >= self.signal_pt_min)
                & (data[NHITS][first] >= SignalCuts.min_hits))

    def training_step(self, data: Record, batch_idx: int) -> Tensor:
        data = random_shift(data, self.z_shift_sigma)
        ops = self._graph_ops(data)
        logits, y, weights = self._logits(self.model, data, ops), self._target(data, ops), \
            self._weights(data)
        mask = getattr(data, "target_edge_mask", None)
        if mask is not None:  # a sampled minibatch (trkx.gnn.sampling): target edges only
            logits, y, weights = logits[mask], y[mask], weights[mask]
        loss = weighted_bce(logits, y, weights, self.focal_gamma)
        self.log("train_loss", loss, batch_size=1, prog_bar=True)
        return loss

    def validation_step(self, data: Record, batch_idx: int) -> None:
        logits = self(data)
        loss = weighted_bce(logits, data.y, self._weights(data))
        weights = self._class_weights(data)
        whole_event = getattr(self.trainer.strategy, "event_mean", None)  # graph_parallel
        self.log("val_loss", loss if whole_event is None else whole_event(loss, data),
                 batch_size=1, prog_bar=True)
        scores = torch.sigmoid(logits.float()).detach().cpu()
        self._val_outputs.append((scores, data.y.cpu(), data.signal.cpu(), weights.cpu()))
        secondary = secondary_edges(data) if "edge_index" in data else None
        if secondary is not None:     # whole events with truth: the split by origin
            self._val_origin.append(origin_counts(kept_edges(scores, self.edge_cut),
                                                  data.signal.cpu(), secondary.cpu()))

    def on_validation_epoch_start(self) -> None:
        self._val_origin = []

    def on_validation_epoch_end(self) -> None:
        if not self._val_outputs:
            return
        scores, y, signal, weights = (torch.cat(parts) for parts in zip(*self._val_outputs))
        self._val_outputs.clear()
        gather = getattr(self.trainer.strategy, "gather_edge_rows", None)  # graph_parallel
        if gather is not None:    # every rank holds its edges only: pool the whole events
            scores, y, signal, weights = gather(scores, y, signal, weights)
        metrics = edge_metrics(scores, y, signal, weights, self.edge_cut)
        self.log_dict(metrics.as_dict("val_"), prog_bar=True)
        if self._val_origin:   # signal edges of prompt and secondary particles kept at the cut
            self.log_dict({f"val_{k}": v for k, v in
                           origin_efficiencies(self._val_origin).items()})
            self._val_origin = []

    def configure_optimizers(self):
        if self.lr_step_size <= 0:
            return adamw_warmup_cosine(self.parameters(), self.learning_rate,
                                       self.weight_decay, self.lr_warmup_steps,
                                       total_steps(self, self.lr_horizon_steps))
        optimizer = torch.optim.AdamW(self.parameters(), lr=self.learning_rate,
                                      weight_decay=self.weight_decay)
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, self.lr_step_size, self.lr_gamma)
        return {"optimizer": optimizer, "lr_scheduler": scheduler}
