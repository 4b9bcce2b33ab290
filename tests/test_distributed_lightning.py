"""Lightning with ``strategy="graph_parallel"`` (one config line) trains like one process."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import torch
from torch.utils.data import DistributedSampler

from tests.test_distributed_train import single_process_training, write_events

REPO = Path(__file__).resolve().parents[1]


def test_lightning_graph_parallel_matches_single_process(tmp_path):
    events = write_events(tmp_path / "events")
    out = tmp_path / "model.pt"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {"PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin",
           "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
    result = subprocess.run([sys.executable, str(REPO / "tests" / "lightning_graph_parallel.py"),
                             str(tmp_path / "events"), str(out), "graph_parallel"],
                            check=False, cwd=REPO, env=env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    trained = torch.load(out, weights_only=True)
    # Lightning shuffles training data (seed 0) like any DDP run; every rank sees the same order
    sampler = DistributedSampler(range(len(events)), num_replicas=1, rank=0, shuffle=True)
    orders = []
    for epoch in range(2):
        sampler.set_epoch(epoch)
        orders.append(list(sampler))
    for name, value in single_process_training(events, orders).items():
        assert torch.allclose(trained[name], value, rtol=1e-4, atol=1e-6), name
