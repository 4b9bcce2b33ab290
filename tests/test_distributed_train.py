"""``torchrun`` training on 2 gloo ranks takes the same optimiser steps as one process."""

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
from trkx.gnn.model import InteractionGNN

REPO = Path(__file__).resolve().parents[1]
MODEL = {"node_features": 3, "hidden": 8, "n_graph_iters": 2, "n_mlp_layers": 1}
OPTIM = {"lr": 1e-3, "epochs": 2, "pos_weight": 2.0, "seed": 3}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_events(folder: Path) -> list[Data]:
    events = []
    for seed in (1, 2):
        pos, x, edge_index, y = make_graph(seed=seed)
        data = Data(x=x.float(), pos=pos.float(), edge_index=edge_index, y=y.bool())
        data.num_nodes = x.shape[0]
        save_record(data, folder / f"event{seed}.pt")
        events.append(data)
    return events


def single_process_training(events: list[Data], orders: list[list[int]] | None = None
                            ) -> dict[str, torch.Tensor]:
    """Plain one-process training; ``orders``: the event order of every epoch."""
    torch.manual_seed(OPTIM["seed"])
    model = InteractionGNN(**MODEL)
    opt = torch.optim.AdamW(model.parameters(), lr=OPTIM["lr"], weight_decay=0.0)
    for epoch in range(OPTIM["epochs"]):
        for index in (orders[epoch] if orders else range(len(events))):
            data = events[index]
            logits = model(data.x, CsrGraphOps(data.edge_index, data.num_nodes))
            loss = torch.nn.functional.binary_cross_entropy_with_logits(
                logits, data.y.float(), pos_weight=torch.tensor(OPTIM["pos_weight"]))
            opt.zero_grad()
            loss.backward()
            opt.step()
    return model.state_dict()


def test_torchrun_training_matches_single_process(tmp_path):
    events = write_events(tmp_path / "events")
    checkpoint = tmp_path / "model.pt"
    config = {"model": MODEL, "data": {"input_dir": str(tmp_path / "events")},
              "optimizer": OPTIM,
              "distributed": {"algorithm": "sparse-1d", "partitioner": "balanced",
                              "timeout_s": 60},
              "output": {"checkpoint": str(checkpoint)}}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    env = {"PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"}
    result = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
         "--master-port", str(free_port()), "-m", "trkx.gnn.distributed.train",
         "--config", str(tmp_path / "config.yaml")],
        check=False, cwd=REPO, env=env, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "loss" in result.stderr
    trained = torch.load(checkpoint, weights_only=True)["model"]
    reference = single_process_training(events)
    for name, value in reference.items():
        assert torch.allclose(trained[name], value, rtol=1e-4, atol=1e-6), name
