"""Lightning DDP over sampled minibatches (2 gloo processes, float64) takes the gradients of one
process on the same minibatches: the mean of the two ranks' minibatch gradients, every step."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.sampling_ddp import SAMPLING, SEED, STEPS, events, make_module
from trkx.gnn.sampling.datamodule import SampledMinibatches

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow
@pytest.mark.subprocess
def test_ddp_gradients_equal_one_process(tmp_path: Path) -> None:
    with socket.socket() as s:       # its own port: two DDP runs in one process would collide
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {"PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin",
           "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
    result = subprocess.run([sys.executable, str(REPO / "tests" / "sampling_ddp.py"),
                             str(tmp_path)], check=False, cwd=REPO, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    ranks = [torch.load(tmp_path / f"grads_rank{r}.pt", weights_only=True) for r in (0, 1)]
    assert len(ranks[0]) == len(ranks[1]) == STEPS

    # one process: minibatches 2j and 2j+1 of the same epoch make DDP step j
    minibatches = list(SampledMinibatches(events(), SAMPLING, seed=SEED, rank=0, world_size=1))
    torch.set_num_threads(1)
    module = make_module().double()
    optimizer = module.configure_optimizers()["optimizer"]
    for step in range(STEPS):
        optimizer.zero_grad()
        summed = {name: torch.zeros_like(p) for name, p in module.model.named_parameters()}
        for record in minibatches[2 * step: 2 * step + 2]:
            module.zero_grad()
            module.training_step(record, 0).backward()
            for name, p in module.model.named_parameters():
                summed[name] += p.grad
        for name, p in module.model.named_parameters():
            p.grad = summed[name] / 2          # DDP averages over the 2 ranks
            for r in (0, 1):
                assert torch.allclose(2 * ranks[r][step][name], summed[name], rtol=0,
                                      atol=1e-10), (step, r, name)
        assert any(float(g.abs().max()) > 1e-6 for g in summed.values())
        optimizer.step()
