"""Hang detection of ``torchrun -m trkx train gnn``: how long after one rank stops (SIGSTOP)
the other ends with its one-line error naming ``distributed.timeout_s``."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def measure_hang(graph: dict, timeout_s: float, work: Path) -> float | None:
    """Seconds from SIGSTOP of rank 1 (of 2, ``torchrun -m trkx train gnn``) until rank 0
    prints its one-line error naming ``distributed.timeout_s``; None when it never did."""
    import yaml
    from torch_geometric.data import Data

    from trkx.data.record import save_record
    events = work / "hang_events"
    data = Data(x=graph["x"], pos=graph["pos"], edge_index=graph["edge_index"],
                y=graph["y"].bool(), signal=graph["signal"])
    data.num_nodes = graph["x"].shape[0]
    save_record(data, events / "event.pt")
    config = {"data": {"train_dir": str(events), "val_dir": str(events)},
              "model": {"hidden": 16, "n_graph_iters": 2, "n_mlp_layers": 1,
                        "edge_features": 0},
              "module": {"graph_ops": "csr", "tune_tracks": False},
              "trainer": {"max_steps": 10 ** 6, "val_every_n_epochs": 10 ** 6, "logger": "none",
                          "progress_bar": False, "accelerator": "cpu"},
              "distributed": {"timeout_s": timeout_s}}
    path = work / "hang.yaml"
    path.write_text(yaml.safe_dump(config))
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    launcher = subprocess.Popen(
        [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
         "--master-port", str(free_port()), "-m", "trkx", "train", "gnn", "--config",
         str(path), "--checkpoint", str(work / "hang.pt")], cwd=REPO, env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    lines: list[tuple[float, str]] = []
    threading.Thread(target=lambda: lines.extend((time.time(), x) for x in launcher.stderr),
                     daemon=True).start()
    workers: list[int] = []
    try:
        last = work / "hang.run" / "last.ckpt"   # one event: written after every step
        deadline = time.time() + 600
        while not last.is_file() and time.time() < deadline and launcher.poll() is None:
            time.sleep(0.2)
        children = Path(f"/proc/{launcher.pid}/task/{launcher.pid}/children").read_text()
        workers = [int(pid) for pid in children.split()]
        ranks = {}
        for pid in workers:
            env_items = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            ranks.update({int(i[5:]): pid for i in env_items if i.startswith(b"RANK=")})
        os.kill(ranks[1], signal.SIGSTOP)
        stopped = time.time()
        while time.time() < stopped + timeout_s + 120:
            hit = next((t for t, x in list(lines) if "distributed.timeout_s" in x), None)
            if hit is not None:
                return hit - stopped
            time.sleep(0.2)
        return None
    finally:   # every torchrun worker has its own session
        for pid in workers:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        os.killpg(launcher.pid, signal.SIGKILL)
        launcher.wait()
