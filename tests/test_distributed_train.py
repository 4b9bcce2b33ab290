"""``torchrun -m trkx train gnn`` with a ``distributed`` section: the single-process training
driver with the graph_parallel strategy. Two gloo ranks take the same optimiser steps, reach
the same validation figures and resume from the same step as one process; a stopped rank ends
the job within ``distributed.timeout_s`` with one line."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import torch
import yaml
from torch_geometric.data import Data

from tests.distributed_worker import make_graph
from trkx.checkpoint import load_checkpoint
from trkx.cli import main
from trkx.data.record import save_record

REPO = Path(__file__).resolve().parents[1]
MODEL = {"hidden": 8, "n_graph_iters": 2, "n_mlp_layers": 1, "edge_features": 0}
# a constant rate (lr_step_size beyond the budget), so resumed runs compare exactly
MODULE = {"graph_ops": "csr", "learning_rate": 1e-3, "signal_weight": 3.0, "true_weight": 1.5,
          "lr_step_size": 1000, "tune_tracks": False, "edge_cut": 0.05}
TRAINER = {"seed": 3, "gradient_clip_val": 0.5, "accelerator": "cpu", "logger": "none",
           "progress_bar": False, "val_every_n_epochs": 1, "min_signal_efficiency": 0.0,
           "max_time": None}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_events(folder: Path) -> None:
    for seed in (1, 2):
        pos, x, edge_index, y = make_graph(seed=seed)
        signal_edges = y.bool() & (torch.arange(y.numel()) % 3 == 0)
        data = Data(x=x.float(), pos=pos.float(), edge_index=edge_index, y=y.bool(),
                    signal=signal_edges)
        data.num_nodes = x.shape[0]
        save_record(data, folder / f"event{seed}.pt")


def write_config(tmp_path: Path, events: Path, distributed: dict | None) -> Path:
    config = {"model": MODEL, "module": MODULE, "trainer": TRAINER,
              # one training event: the two samplers (single process: RandomSampler, graph
              # parallel: DistributedSampler) shuffle differently, the steps must not
              "data": {"train_dir": str(events), "train_events": 1, "val_dir": str(events)}}
    if distributed is not None:
        config["distributed"] = distributed
    path = tmp_path / ("distributed.yaml" if distributed is not None else "single.yaml")
    path.write_text(yaml.safe_dump(config))
    return path


def torchrun(config: Path, checkpoint: Path, *sets: str, wait: bool = True):
    env = {"PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"}
    argv = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
            "--master-port", str(free_port()), "-m", "trkx", "train", "gnn", "--config",
            str(config), "--checkpoint", str(checkpoint),
            *(item for s in sets for item in ("--set", s))]
    if not wait:
        return subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True)
    return subprocess.run(argv, check=False, cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=300)


def test_torchrun_trains_validates_and_resumes_like_one_process(tmp_path: Path) -> None:
    torch.set_num_threads(1)
    events = tmp_path / "events"
    write_events(events)
    single = write_config(tmp_path, events, None)
    parallel = write_config(tmp_path, events, {"algorithm": "sparse-1d",
                                               "partitioner": "balanced", "timeout_s": 60})
    assert main(["train", "gnn", "--config", str(single), "--checkpoint",
                 str(tmp_path / "single.pt"), "--set", "trainer.max_steps=4"]) == 0
    result = torchrun(parallel, tmp_path / "dist.pt", "trainer.max_steps=4")
    assert result.returncode == 0, result.stderr[-3000:]
    one = load_checkpoint(tmp_path / "single.pt", "gnn")
    two = load_checkpoint(tmp_path / "dist.pt", "gnn")
    for name, value in one.state_dict.items():
        assert torch.allclose(two.state_dict[name], value, rtol=1e-4, atol=1e-6), name
    # validation ran on whole events: the same figures as one process
    for key in ("val_loss", "val_efficiency", "val_purity", "val_auc"):
        assert abs(two.metrics[key] - one.metrics[key]) < 1e-4, (key, one.metrics, two.metrics)
    assert two.metrics["best_step"] == 4.0

    # resume: 2 steps, then a 4-step budget continues from step 2 to the same weights
    first = torchrun(parallel, tmp_path / "resumed.pt", "trainer.max_steps=2")
    assert first.returncode == 0, first.stderr[-3000:]
    second = torchrun(parallel, tmp_path / "resumed.pt", "trainer.max_steps=4")
    assert second.returncode == 0, second.stderr[-3000:]
    assert "resuming" in second.stdout and "at step 2" in second.stdout
    resumed = load_checkpoint(tmp_path / "resumed.pt", "gnn")
    for name, value in two.state_dict.items():
        assert torch.allclose(resumed.state_dict[name], value, rtol=1e-5, atol=1e-7), name


def worker_pids(launcher: int) -> list[int]:
    children = Path(f"/proc/{launcher}/task/{launcher}/children").read_text().split()
    return [int(pid) for pid in children]


def rank_of(pid: int) -> int | None:
    environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    for item in environ:
        if item.startswith(b"RANK="):
            return int(item[5:])
    return None


def test_a_stopped_rank_ends_the_job_within_the_timeout(tmp_path: Path) -> None:
    events = tmp_path / "events"
    write_events(events)
    parallel = write_config(tmp_path, events, {"algorithm": "sparse-1d", "timeout_s": 5})
    process = torchrun(parallel, tmp_path / "hang.pt", "trainer.max_steps=100000",
                       "trainer.val_every_n_epochs=1000", wait=False)
    try:
        run = tmp_path / "hang.run"
        deadline = time.time() + 120
        while not (run / "config.json").is_file() and time.time() < deadline:
            time.sleep(0.2)                                   # both ranks are training
        time.sleep(2.0)
        ranks = {rank_of(pid): pid for pid in worker_pids(process.pid)}
        os.kill(ranks[1], signal.SIGSTOP)
        stopped = time.time()
        _, err = process.communicate(timeout=120)
        detected = time.time() - stopped
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode != 0
    assert "waited more than distributed.timeout_s=5 s for another rank" in err
    assert detected < 60, detected
