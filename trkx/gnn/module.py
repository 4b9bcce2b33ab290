"""``GNNModule``: training and validation of the interaction network (Lightning).

Each step is one event graph, or one sampled minibatch (:mod:`trkx.gnn.sampling`) whose loss
counts only the edges of its ``target_edge_mask``. The loss is the weighted BCE of
:mod:`trkx.gnn.metrics`;
validation pools all events of the epoch and logs ``val_loss``, ``val_efficiency`` (signal
edges kept), ``val_purity`` (true among kept) and ``val_auc`` at ``edge_cut``.
"""

from __future__ import annotations

import pytorch_lightning as pl
import torch
from torch import Tensor
from torch_geometric.data import Data

from trkx.gnn.metrics import edge_metrics, edge_weights, weighted_bce
from trkx.gnn.model import InteractionGNN
from trkx.gnn.ops_factory import GRAPH_OPS_CHOICES, KernelChooser, build_graph_ops


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
        edge_cut: score above which an edge is kept, for the metrics.
    """

    def __init__(self, model: InteractionGNN, graph_ops: str = "auto",
                 learning_rate: float = 1e-3, weight_decay: float = 0.0,
                 lr_step_size: int = 0, lr_gamma: float = 0.5, signal_weight: float = 2.0,
                 true_weight: float = 1.0, fake_weight: float = 1.0,
                 edge_cut: float = 0.5) -> None:
        super().__init__()
        self.save_hyperparameters(ignore=["model"])
        if graph_ops not in GRAPH_OPS_CHOICES:
            raise ValueError(f"graph_ops {graph_ops!r} is not one of "
                             f"{', '.join(GRAPH_OPS_CHOICES)}")
        if not 0.0 < edge_cut < 1.0:
            raise ValueError(f"edge_cut must lie in (0, 1), got {edge_cut}")
        if min(signal_weight, true_weight, fake_weight) < 0:
            raise ValueError("edge weights must be >= 0")
        self.model = model
        self.graph_ops = graph_ops
        self.learning_rate = learning_rate
        self.weight_decay = weight_decay
        self.lr_step_size = lr_step_size
        self.lr_gamma = lr_gamma
        self.signal_weight = signal_weight
        self.true_weight = true_weight
        self.fake_weight = fake_weight
        self.edge_cut = edge_cut
        self.chooser = KernelChooser(width=model.hidden)
        self._val_outputs: list[tuple[Tensor, Tensor, Tensor, Tensor]] = []

    def forward(self, data: Data) -> Tensor:
        """Edge logits [E] of one event graph."""
        # A graph-parallel strategy hands each rank its block with distributed ops attached.
        ops = getattr(data, "graph_ops", None) or build_graph_ops(
            data.edge_index, data.num_nodes, self.graph_ops, self.chooser)
        return self.model(data.x, ops)

    def edge_loss_normaliser(self, data: Data) -> float:
        """Denominator of the weighted BCE (GraphParallelStrategy rescales the loss by it)."""
        return float(self._weights(data).sum())

    def _weights(self, data: Data) -> Tensor:
        return edge_weights(data.y, data.signal, self.signal_weight, self.true_weight,
                            self.fake_weight)

    def training_step(self, data: Data, batch_idx: int) -> Tensor:
        logits, y, weights = self(data), data.y, self._weights(data)
        mask = getattr(data, "target_edge_mask", None)
        if mask is not None:  # a sampled minibatch (trkx.gnn.sampling): target edges only
            logits, y, weights = logits[mask], y[mask], weights[mask]
        loss = weighted_bce(logits, y, weights)
        self.log("train_loss", loss, batch_size=1, prog_bar=True)
        return loss

    def validation_step(self, data: Data, batch_idx: int) -> None:
        logits = self(data)
        weights = self._weights(data)
        self.log("val_loss", weighted_bce(logits, data.y, weights), batch_size=1,
                 prog_bar=True)
        self._val_outputs.append((torch.sigmoid(logits.float()).detach().cpu(),
                                  data.y.cpu(), data.signal.cpu(), weights.cpu()))

    def on_validation_epoch_end(self) -> None:
        if not self._val_outputs:
            return
        scores, y, signal, weights = (torch.cat(parts) for parts in zip(*self._val_outputs))
        self._val_outputs.clear()
        metrics = edge_metrics(scores, y, signal, weights, self.edge_cut)
        self.log_dict(metrics.as_dict("val_"), prog_bar=True)

    def configure_optimizers(self):
        optimizer = torch.optim.AdamW(self.parameters(), lr=self.learning_rate,
                                      weight_decay=self.weight_decay)
        if self.lr_step_size <= 0:
            return optimizer
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, self.lr_step_size, self.lr_gamma)
        return {"optimizer": optimizer, "lr_scheduler": scheduler}
