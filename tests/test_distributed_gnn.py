"""Distributed GraphOps equal the single-process model (float64) and move exactly the bytes
their analytic / halo counts say. Each world size runs in its own processes on its own port."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from torch import nn

from tests.distributed_worker import BYTE_CHECK_WIDTH, CONFIGS, make_graph, make_models, worker
from trkx.gnn.distributed.layout import ProcessLayout
from trkx.gnn.distributed.volume import oblivious, onefive, sparse1d
from trkx.gnn.local_ops import CsrGraphOps

TOLERANCE = 1e-10
REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.subprocess    # every test runs its ranks in their own processes


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class DenseOps:
    """The definition: dense float64 incidence matrices S and D."""

    def __init__(self, edge_index: torch.Tensor, num_nodes: int) -> None:
        E = edge_index.shape[1]
        self.S = torch.zeros(E, num_nodes, dtype=torch.float64)
        self.D = torch.zeros(E, num_nodes, dtype=torch.float64)
        self.S[torch.arange(E), edge_index[0]] = 1.0
        self.D[torch.arange(E), edge_index[1]] = 1.0
        self.num_nodes, self.num_edges = num_nodes, E

    def gather(self, x):
        return self.S @ x, self.D @ x

    def aggregate(self, e):
        return self.D.T @ e, self.S.T @ e


@pytest.fixture(scope="module")
def graph():
    return make_graph()


@pytest.fixture(scope="module")
def reference(graph):
    _pos, x, edge_index, y = graph
    ops = {"two_layer": DenseOps(edge_index, x.shape[0]),
           "interaction_gnn": CsrGraphOps(edge_index, x.shape[0]),
           "interaction_gnn_mean": CsrGraphOps(edge_index, x.shape[0])}
    out = {}
    for name, model in make_models().items():
        logits = model(x, ops[name])
        loss = nn.functional.binary_cross_entropy_with_logits(logits, y)
        loss.backward()
        out[name] = {"logits": logits.detach(), "loss": float(loss.detach()),
                     "grads": {n: p.grad.clone() for n, p in model.named_parameters()}}
    return out


_RUNS: dict[int, list[dict]] = {}


def run_world(world_size: int, tmp_path_factory) -> list[dict]:
    if world_size not in _RUNS:
        out = tmp_path_factory.mktemp(f"world{world_size}")
        torch.multiprocessing.spawn(worker, args=(world_size, free_port(), str(out)),
                                    nprocs=world_size, join=True)
        _RUNS[world_size] = [torch.load(out / f"rank{r}.pt", weights_only=True)
                             for r in range(world_size)]
    return _RUNS[world_size]


def relative_error(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-300))


CASES = [(P, *cfg) for P, cfgs in CONFIGS.items() for cfg in cfgs]


@pytest.mark.parametrize("world_size,algorithm,partitioner,c,overlap", CASES)
def test_distributed_equals_single_process(world_size, algorithm, partitioner, c, overlap,
                                           reference, tmp_path_factory):
    ranks = run_world(world_size, tmp_path_factory)
    key = f"{algorithm}|{partitioner}|{c}|{overlap}"
    covered = torch.zeros(reference["two_layer"]["logits"].numel(), dtype=torch.int64)
    for rank, result in enumerate(ranks):
        entry = result[key]
        covered[entry["edges"]] += 1
        for name, ref in reference.items():
            got = entry[name]
            assert relative_error(got["logits"], ref["logits"][entry["edges"]]) < TOLERANCE, \
                f"{name} logits differ on rank {rank}"
            assert abs(got["loss"] - ref["loss"]) / abs(ref["loss"]) < TOLERANCE, name
            for pname, grad in ref["grads"].items():
                assert relative_error(got["grads"][pname], grad) < TOLERANCE, \
                    f"{name} gradient of {pname} differs on rank {rank}"
    assert bool((covered == c).all()), "every edge must be owned by exactly c ranks"


def halo_counts(edge_index, owner, world_size):
    """Independent count: rows each block receives from / returns to each other block."""
    need = [[set() for _ in range(world_size)] for _ in range(world_size)]  # need[p][q]
    for s, d in edge_index.t().tolist():
        p, q = int(owner[d]), int(owner[s])
        if p != q:
            need[p][q].add(s)
    return [[len(need[p][q]) for q in range(world_size)] for p in range(world_size)]


@pytest.mark.parametrize("world_size,algorithm,partitioner,c,overlap", CASES)
def test_measured_bytes_equal_analytic_count(world_size, algorithm, partitioner, c, overlap,
                                             graph, tmp_path_factory):
    ranks = run_world(world_size, tmp_path_factory)
    key = f"{algorithm}|{partitioner}|{c}|{overlap}"
    row_bytes = BYTE_CHECK_WIDTH * 8
    owner = ranks[0][key]["owner"]
    blocks = world_size // c
    sizes = torch.bincount(owner, minlength=blocks).tolist()
    need = halo_counts(graph[2], owner, world_size) if algorithm == "sparse-1d" else None
    analytic = sparse1d(graph[2], owner, world_size, row_bytes) if need else None
    for rank, result in enumerate(ranks):
        stats = result[key]["stats"]
        if algorithm == "oblivious-1d":
            expected = {op: vars(v) for op, v in oblivious(sizes, rank, row_bytes).items()}
        elif algorithm == "1.5d":
            layout = ProcessLayout(world_size, rank, c)
            expected = {op: vars(v) for op, v in
                        onefive(sizes, layout, result[key]["num_sources"], row_bytes).items()}
        else:
            fetched = sum(need[rank]) * row_bytes
            returned = sum(need[p][rank] for p in range(world_size)) * row_bytes
            msgs_in = sum(1 for v in need[rank] if v)
            msgs_out = sum(1 for p in range(world_size) if need[p][rank])
            fetch = {"bytes_sent": returned, "bytes_received": fetched,
                     "messages_sent": msgs_out, "messages_received": msgs_in}
            give = {"bytes_sent": fetched, "bytes_received": returned,
                    "messages_sent": msgs_in, "messages_received": msgs_out}
            expected = {"gather.forward": fetch, "aggregate.backward": fetch,
                        "gather.backward": give, "aggregate.forward": give}
            assert fetched < (sum(sizes) - sizes[rank]) * row_bytes
            for op, counts in expected.items():      # the analytic volume trkx partition uses
                assert {k: v for k, v in vars(analytic[rank][op]).items()
                        if k != "collectives"} == counts, (rank, op)
        for op, counts in expected.items():
            for field, value in counts.items():
                if field != "collectives":
                    assert stats[op][field] == value, (rank, op, field)


def test_failed_rank_makes_others_exit(tmp_path):
    """A rank that dies makes the survivor raise within the timeout instead of hanging."""
    port = str(free_port())
    env = {"PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"}
    start = time.monotonic()
    procs = [subprocess.Popen([sys.executable, "-m", "tests.distributed_worker", str(r), "2",
                               port], cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE) for r in range(2)]
    try:
        codes = [p.wait(timeout=60) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert codes[1] == 3
    assert codes[0] != 0, "the surviving rank must fail, not succeed"
    assert time.monotonic() - start < 60
