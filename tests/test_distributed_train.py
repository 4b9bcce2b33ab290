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
import threading
import time
from pathlib import Path

import pytest
import torch
import yaml

from tests.distributed_worker import make_graph
from trkx.cli import main
from trkx.data.record import save_record
from trkx.data.record_type import Record
from trkx.files.checkpoint import load_checkpoint

REPO = Path(__file__).resolve().parents[1]
# edge inputs on: each rank's block needs the whole event's edge geometry and filter scores
MODEL = {"hidden": 8, "n_graph_iters": 2, "n_mlp_layers": 1, "edge_features": 5}
# a constant rate (lr_step_size beyond the budget), so resumed runs compare exactly
MODULE = {"graph_ops": "csr", "learning_rate": 1e-3, "signal_weight": 3.0, "true_weight": 1.5,
          "lr_step_size": 1000, "edge_cut": 0.05}
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
        data = Record(x=x.double(), pos=pos.double(), edge_index=edge_index, y=y.bool(),
                    signal=signal_edges,
                    scores=torch.rand(y.numel(), generator=torch.Generator().manual_seed(seed)))
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
        return subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True, start_new_session=True)
    return subprocess.run(argv, check=False, cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=300)


def train_one_process(config: Path, checkpoint: Path, steps: int):
    assert main(["train", "gnn", "--config", str(config), "--checkpoint", str(checkpoint),
                 "--set", f"trainer.max_steps={steps}"]) == 0
    return load_checkpoint(checkpoint, "gnn")


def last_weights(checkpoint: Path) -> dict[str, torch.Tensor]:
    """The weights after the last step (the exported checkpoint holds the best ones)."""
    return torch.load(checkpoint.with_suffix(".run") / "last.ckpt", map_location="cpu",
                      weights_only=True)["state_dict"]


def assert_same_weights(got: dict, expected: dict, what: str) -> None:
    assert got.keys() == expected.keys()
    for name, value in expected.items():
        assert torch.allclose(got[name], value, rtol=1e-5, atol=1e-7), (what, name)


@pytest.mark.slow
@pytest.mark.subprocess
def test_torchrun_trains_validates_and_resumes_like_one_process(tmp_path: Path) -> None:
    """k steps on 2 ranks = k steps on one process (weights, whole-event validation figures);
    then the same run resumed to 2k steps = 2k steps on one process from scratch (k = 2)."""
    torch.set_num_threads(1)
    events = tmp_path / "events"
    write_events(events)
    single = write_config(tmp_path, events, None)
    parallel = write_config(tmp_path, events, {"algorithm": "sparse-1d",
                                               "partitioner": "balanced", "timeout_s": 60})
    one = train_one_process(single, tmp_path / "single_k.pt", 2)
    first = torchrun(parallel, tmp_path / "dist.pt", "trainer.max_steps=2")
    assert first.returncode == 0, first.stderr[-3000:]
    assert first.stdout.count("gnn: trained to step 2") == 1, first.stdout[-2000:]  # rank 0's
    two = load_checkpoint(tmp_path / "dist.pt", "gnn")
    assert_same_weights(last_weights(tmp_path / "dist.pt"), last_weights(tmp_path / "single_k.pt"),
                        "k steps")
    # the exported weights are the best validated ones, validated on whole events: the same
    # step and figures as one process
    assert_same_weights(two.state_dict, one.state_dict, "best weights")
    assert two.metrics["best_step"] == one.metrics["best_step"]
    for key in ("val_loss", "val_efficiency", "val_purity", "val_auc"):
        assert abs(two.metrics[key] - one.metrics[key]) < 1e-5, (key, one.metrics, two.metrics)
    assert {p.name for p in (tmp_path / "dist.run").glob("*.ckpt")} == {"last.ckpt",
                                                                     "best.ckpt"}

    # resume: the same command with a 2k budget continues from step k
    second = torchrun(parallel, tmp_path / "dist.pt", "trainer.max_steps=4")
    assert second.returncode == 0, second.stderr[-3000:]
    assert "resuming" in second.stdout and "at step 2" in second.stdout, second.stdout[-2000:]
    whole = train_one_process(single, tmp_path / "single_2k.pt", 4)
    assert_same_weights(last_weights(tmp_path / "dist.pt"),
                        last_weights(tmp_path / "single_2k.pt"), "k + resume + k steps")
    resumed = load_checkpoint(tmp_path / "dist.pt", "gnn")
    assert resumed.metrics["best_step"] == whole.metrics["best_step"]
    assert_same_weights(resumed.state_dict, whole.state_dict, "best weights after resume")


@pytest.mark.slow
@pytest.mark.subprocess
def test_max_time_stops_every_rank_with_a_resumable_checkpoint(tmp_path: Path) -> None:
    events = tmp_path / "events"
    write_events(events)
    parallel = write_config(tmp_path, events, {"algorithm": "sparse-1d", "timeout_s": 60})
    result = torchrun(parallel, tmp_path / "timed.pt", "trainer.max_steps=1000000",
                      "trainer.max_time=00:00:00:04")
    assert result.returncode == 0, result.stderr[-3000:]
    step = torch.load(tmp_path / "timed.run" / "last.ckpt", weights_only=True)["global_step"]
    assert 0 < step < 1000000
    assert load_checkpoint(tmp_path / "timed.pt", "gnn").metrics["best_step"] <= step


def worker_pids(launcher: int) -> list[int]:
    children = Path(f"/proc/{launcher}/task/{launcher}/children").read_text().split()
    return [int(pid) for pid in children]


def rank_of(pid: int) -> int | None:
    environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    for item in environ:
        if item.startswith(b"RANK="):
            return int(item[5:])
    return None


@pytest.mark.slow
@pytest.mark.subprocess
def test_a_stopped_rank_ends_the_job_within_the_timeout(tmp_path: Path) -> None:
    """SIGSTOP one rank mid-training: the other prints one line naming distributed.timeout_s
    within the timeout (torchrun then takes its own 30 s SIGTERM grace before SIGKILL of a
    stopped process, so the test ends the launcher itself once the line is out)."""
    events = tmp_path / "events"
    write_events(events)
    parallel = write_config(tmp_path, events, {"algorithm": "sparse-1d", "timeout_s": 5})
    process = torchrun(parallel, tmp_path / "hang.pt", "trainer.max_steps=100000",
                       "trainer.val_every_n_epochs=1000", wait=False)
    lines: list[tuple[float, str]] = []
    reader = threading.Thread(target=lambda: lines.extend(
        (time.time(), line) for line in process.stderr), daemon=True)
    reader.start()
    try:
        last = tmp_path / "hang.run" / "last.ckpt"    # one training event: saved every step
        deadline = time.time() + 120
        while not last.is_file() and time.time() < deadline and process.poll() is None:
            time.sleep(0.2)
        assert last.is_file(), "training never took a step"
        ranks = {rank_of(pid): pid for pid in worker_pids(process.pid)}
        os.kill(ranks[1], signal.SIGSTOP)
        stopped = time.time()
        message = None
        while message is None and time.time() < stopped + 60:
            message = next((item for item in list(lines) if "error:" in item[1]), None)
            time.sleep(0.2)
    finally:   # torchrun starts every worker in its own session: end them one by one
        for pid in worker_pids(process.pid) if process.poll() is None else []:
            os.kill(pid, signal.SIGKILL)
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    assert message is not None, "".join(line for _, line in lines)[-3000:]
    at, line = message
    assert line.startswith("trkx train: error: ") and line.count("\n") == 1
    assert "rank 0 waited more than distributed.timeout_s=5 s for another rank" in line
    assert at - stopped < 5 + 10, at - stopped       # the timeout, plus a loaded machine


def test_keys_that_cannot_act_on_blocks_are_refused(tmp_path: Path, capsys) -> None:
    events = tmp_path / "events"
    write_events(events)
    config = yaml.safe_load(write_config(tmp_path, events, {"timeout_s": 5}).read_text())
    cases = {"module.graph_ops": ("module", "graph_ops", "scatter"),
             "module.signal_pt_power": ("module", "signal_pt_power", 1.0),
             "distributed.timeout_s": ("distributed", "timeout_s", -1)}
    for key, (name, field, value) in cases.items():
        bad = {**config, name: {**config[name], field: value}}
        path = tmp_path / f"{field}.yaml"
        path.write_text(yaml.safe_dump(bad))
        assert main(["train", "gnn", "--config", str(path), "--checkpoint",
                     str(tmp_path / "never.pt")]) == 2
        lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
        assert len(lines) == 1 and key in lines[0], (key, lines)
    assert not (tmp_path / "never.pt").exists()


def test_node_count_comes_from_torchrun(monkeypatch) -> None:
    """Two torchrun agents of one process each: Lightning's default num_nodes=1 would refuse
    (devices x num_nodes != WORLD_SIZE); checked by hand with two c10d agents on one host."""
    from trkx.gnn.distributed.lightning import GraphParallelStrategy

    strategy = GraphParallelStrategy()
    monkeypatch.setenv("WORLD_SIZE", "8")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")
    strategy.num_nodes = 1           # what the Trainer sets from its num_nodes
    assert strategy.num_nodes == 2
    monkeypatch.delenv("WORLD_SIZE")
    strategy.num_nodes = 3           # no torchrun: the Trainer's value
    assert strategy.num_nodes == 3
