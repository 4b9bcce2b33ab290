"""``torchrun -m trkx train gnn`` on 2 gloo ranks takes the same optimiser steps as one
process (the gnn CLI hands configs with a ``distributed`` section to trkx.gnn.distributed)."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import torch
import yaml
from torch_geometric.data import Data

from tests.distributed_worker import make_graph
from trkx.data.record import save_record
from trkx.gnn.local_ops import CsrGraphOps
from trkx.gnn.metrics import edge_weights, weighted_bce
from trkx.gnn.model import InteractionGNN

REPO = Path(__file__).resolve().parents[1]
MODEL = {"node_features": 3, "hidden": 8, "n_graph_iters": 2, "n_mlp_layers": 1}
LOSS = {"learning_rate": 1e-3, "signal_weight": 3.0, "true_weight": 1.5, "fake_weight": 1.0}
EPOCHS, CLIP, SEED = 2, 0.5, 3


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_events(folder: Path) -> list[Data]:
    events = []
    for seed in (1, 2):
        pos, x, edge_index, y = make_graph(seed=seed)
        signal = y.bool() & (torch.arange(y.numel()) % 3 == 0)
        data = Data(x=x.float(), pos=pos.float(), edge_index=edge_index, y=y.bool(),
                    signal=signal)
        data.num_nodes = x.shape[0]
        save_record(data, folder / f"event{seed}.pt")
        events.append(data)
    return events


def loss_weights(data: Data) -> torch.Tensor:
    return edge_weights(data.y, data.signal, LOSS["signal_weight"], LOSS["true_weight"],
                        LOSS["fake_weight"])


def single_process_training(events: list[Data], orders: list[list[int]] | None = None
                            ) -> dict[str, torch.Tensor]:
    """Plain one-process training; ``orders``: the event order of every epoch."""
    torch.manual_seed(SEED)
    model = InteractionGNN(**MODEL)
    opt = torch.optim.AdamW(model.parameters(), lr=LOSS["learning_rate"], weight_decay=0.0)
    for epoch in range(EPOCHS):
        for index in (orders[epoch] if orders else range(len(events))):
            data = events[index]
            logits = model(data.x, CsrGraphOps(data.edge_index, data.num_nodes))
            loss = weighted_bce(logits, data.y, loss_weights(data))
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
            opt.step()
    return model.state_dict()


def test_torchrun_training_matches_single_process(tmp_path):
    events = write_events(tmp_path / "events")
    config = {"model": MODEL, "data": {"train_dir": str(tmp_path / "events")},
              "module": LOSS,
              "trainer": {"max_epochs": EPOCHS, "gradient_clip_val": CLIP, "seed": SEED,
                          "accelerator": "cpu"},
              "distributed": {"algorithm": "sparse-1d", "partitioner": "balanced",
                              "timeout_s": 60}}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    env = {"PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"}
    result = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
         "--master-port", str(free_port()), "-m", "trkx", "train", "gnn",
         "--config", str(tmp_path / "config.yaml"), "--output", str(tmp_path / "run"),
         "--seed", str(SEED)],
        check=False, cwd=REPO, env=env, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "loss" in result.stderr
    trained = torch.load(tmp_path / "run" / "gnn.pt", weights_only=True)["state_dict"]
    reference = single_process_training(events)
    for name, value in reference.items():
        assert torch.allclose(trained[name], value, rtol=1e-4, atol=1e-6), name
