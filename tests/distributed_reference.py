"""The single-process run every distributed training test compares with (float64).

``GNNModule``'s loss (weighted BCE) and metrics, AdamW, gradient clipping after the gradient
sum, events in the order Lightning's training loader gives them under DDP (shuffled by a
``DistributedSampler`` with seed ``PL_GLOBAL_SEED``, 0 unless seeded; every graph-parallel
rank sees every event, so one replica): the gradients of every step, the trained weights and the
validation metrics (``val_loss``: mean of the events' losses; the others pooled over events).
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch.utils.data import DistributedSampler

from tests.distributed_worker import make_graph
from trkx.data.record import load_record, save_record
from trkx.data.record_type import Record
from trkx.edges.loss import edge_weights, weighted_bce
from trkx.gnn.local_ops import CsrGraphOps
from trkx.gnn.metrics import edge_metrics
from trkx.gnn.model import InteractionGNN

MODEL = {"node_features": 3, "hidden": 8, "n_graph_iters": 2, "n_mlp_layers": 1}
LOSS = {"learning_rate": 1e-2, "signal_weight": 3.0, "true_weight": 1.5, "fake_weight": 1.0,
        "edge_cut": 0.5}
EPOCHS, CLIP, SEED = 2, 0.5, 3


def write_events(folder: Path, seeds: tuple[int, ...] = (1, 2)) -> Path:
    """Small detector-like event records (x, pos, edge_index, y, signal) in ``folder``."""
    for seed in seeds:
        pos, x, edge_index, y = make_graph(seed=seed)
        signal = y.bool() & (torch.arange(y.numel()) % 3 == 0)
        data = Record(x=x.float(), pos=pos.float(), edge_index=edge_index, y=y.bool(),
                    signal=signal)
        data.num_nodes = x.shape[0]
        save_record(data, folder / f"event{seed}.pt")
    return folder


def load_events(folder: str | Path) -> list[Record]:
    """The records of ``folder`` in file order, node features in float64."""
    events = [load_record(p) for p in sorted(Path(folder).glob("*.pt"))]
    for data in events:
        data.x = data.x.double()
    return events


def loss_weights(data: Record) -> torch.Tensor:
    return edge_weights(data.y, data.signal, LOSS["signal_weight"], LOSS["true_weight"],
                        LOSS["fake_weight"])


def make_model() -> InteractionGNN:
    torch.manual_seed(SEED)
    return InteractionGNN(**MODEL).double()


def epoch_orders(num_events: int, epochs: int, seed: int = 0) -> list[int]:
    """The event indices Lightning trains on, epoch after epoch."""
    sampler = DistributedSampler(range(num_events), num_replicas=1, rank=0, shuffle=True,
                                 seed=seed)
    order = []
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        order += list(sampler)
    return order


def train_steps(model: InteractionGNN, optimizer: torch.optim.Optimizer, events: list[Record],
                order: list[int]) -> list[dict[str, torch.Tensor]]:
    """One optimiser step per index of ``order``; the gradient of every step."""
    grads = []
    for index in order:
        data = events[index]
        logits = model(data.x, CsrGraphOps(data.edge_index, data.num_nodes))
        loss = weighted_bce(logits, data.y, loss_weights(data))
        optimizer.zero_grad()
        loss.backward()
        grads.append({n: p.grad.detach().clone() for n, p in model.named_parameters()})
        torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
        optimizer.step()
    return grads


@torch.no_grad()
def validate(model: InteractionGNN, events: list[Record]) -> dict[str, float]:
    losses, parts = [], []
    for data in events:
        logits = model(data.x, CsrGraphOps(data.edge_index, data.num_nodes))
        weights = loss_weights(data)
        losses.append(float(weighted_bce(logits, data.y, weights)))
        parts.append((torch.sigmoid(logits.float()), data.y, data.signal, weights))
    scores, y, signal, weights = (torch.cat(p) for p in zip(*parts))
    metrics = edge_metrics(scores, y, signal, weights, LOSS["edge_cut"]).as_dict("val_")
    return {"val_loss": sum(losses) / len(losses), **metrics}


def single_process(train: list[Record], val: list[Record] | None = None,
                   epochs: int = EPOCHS) -> dict:
    """Gradients of every step, trained weights and final validation metrics."""
    model = make_model()
    optimizer = torch.optim.AdamW(model.parameters(), lr=LOSS["learning_rate"],
                                  weight_decay=0.0)
    grads = train_steps(model, optimizer, train, epoch_orders(len(train), epochs))
    return {"grads": grads, "state": model.state_dict(),
            "metrics": validate(model, val) if val else {}}
