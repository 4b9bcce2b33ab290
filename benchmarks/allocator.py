"""What the memory allocator costs trkx: inference and training throughput per allocator.

    python benchmarks/allocator.py --infer-events $TRKX_DATA/real_pixel_truth \
        --graphs runs/alloc31/graphs/filter --json benchmarks/results/allocator.json

Every figure comes from a child process started with one allocator (trkx/runtime/allocator.py):
``mimalloc`` (trkx's default), ``jemalloc`` (where the system has it), ``glibc`` (trkx's
fallback settings), ``off`` (the C library's defaults) and ``before`` (what trkx 0.2.0 did:
glibc's defaults for ``trkx infer``, a 64 KiB mmap threshold for training). Per allocator:

- ``infer``: ``trkx infer --no-evaluate`` of ``--infer-events`` (shipped models): the per-event
  stage seconds of its timing.json, the process's user and system CPU seconds, peak RSS;
- ``whole``: whole-event GNN training steps (``trkx.gnn.module.GNNModule.training_step`` and
  AdamW, the shipped GNN's shape: hidden 64, 6 iterations, CSR kernels) on the first record of
  ``--graphs``: median step seconds, edges per second, user and system CPU seconds of the timed
  steps, peak RSS;
- ``sampled``: the pile-up-200 recipe's minibatches (256 targets, 2 hops, fan-out [6, 4]) of
  every record of ``--graphs``, one per step: edges per second, user and system CPU, RSS after
  ``--growth-steps`` (first, last) steps: a caching allocator that fragments would grow.

The first step of each child is a warm-up (kernel choice, optimiser state) off the clock.
Timings share the machine with whatever else runs: compare the allocators of one run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import harness
from harness import peak_rss_kib, rss_kib

from trkx.runtime import allocator

ALLOCATORS = ("mimalloc", "jemalloc", "glibc", "off", "before")
MODEL = {"hidden": 64, "n_graph_iters": 6, "n_mlp_layers": 2}
SAMPLING = {"targets_per_batch": 256, "hops": 2, "fanout": [6, 4], "bulk": 8}


def child_environment(name: str, task: str) -> dict[str, str]:
    """The environment of a child that runs under allocator ``name``."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("LD_PRELOAD", "MALLOC_CONF", allocator.REEXEC_GUARD)
           and not k.startswith(("MIMALLOC_", "MALLOC_"))}
    if name in allocator.PRELOADED:
        library = allocator.library_of(name)
        assert library is not None, name
        return {**allocator.preload_environment(name, library, env), allocator.ENV: name}
    if name == "before":
        env[allocator.ENV] = "off"
        if task != "infer":
            env["MALLOC_MMAP_THRESHOLD_"] = str(64 * 1024)    # trkx 0.2.0's trkx train
        return env
    return {**env, allocator.ENV: name}


def run_child(args: list[str], env: dict[str, str]) -> tuple[str, dict[str, float]]:
    """Run a child to its end: its stdout and its wall, user and system CPU seconds and peak
    RSS (GB, from ``wait4``: the child's own, after any re-execution)."""
    start = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        process = subprocess.Popen(args, stdout=out, stderr=err, env=env)
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        text, stderr = out.read().decode(), err.read().decode()
    if process.returncode:
        raise RuntimeError(f"{' '.join(args)} failed:\n{stderr[-2000:]}")
    return text, {"wall_s": time.perf_counter() - start, "user_s": usage.ru_utime,
                  "system_s": usage.ru_stime, "peak_rss_gb": usage.ru_maxrss / 2**20}


def measure_infer(events: Path, name: str) -> dict:
    with tempfile.TemporaryDirectory() as out:
        _, figures = run_child([sys.executable, "-m", "trkx", "infer", "--events", str(events),
                                "--out", out, "--no-evaluate"], child_environment(name, "infer"))
        timing = json.loads((Path(out) / "timing.json").read_text())
    cpu = timing["cpu_seconds"]
    return {"allocator": timing["allocator"], "stage_seconds": timing["mean_seconds"],
            "user_s": cpu["user"], "system_s": cpu["system"],
            "system_share": cpu["system"] / (cpu["user"] + cpu["system"]),
            "peak_rss_gb": figures["peak_rss_gb"], "wall_s": figures["wall_s"]}


def measure_training(task: str, graphs: Path, name: str, steps: int) -> dict:
    text, _ = run_child([sys.executable, __file__, "--child", task, "--graphs", str(graphs),
                         "--steps", str(steps)], child_environment(name, task))
    return json.loads(text.strip().splitlines()[-1])


# ---------------------------------------------------------------- the child's side
def cpu_seconds() -> tuple[float, float]:
    times = os.times()
    return times.user, times.system


def child(task: str, graphs: Path, steps: int) -> dict:
    """``steps`` timed training steps of ``task`` (whole | sampled) after one warm-up."""
    import warnings

    import torch

    from trkx.gnn.model import InteractionGNN
    from trkx.gnn.module import GNNModule
    from trkx.gnn.records import GraphRecordDataset
    from trkx.gnn.sampling.datamodule import SampledMinibatches, SamplingConfig

    if allocator.requested() == "glibc":
        allocator.apply_glibc_settings()
    warnings.filterwarnings("ignore")                 # self.log outside a Trainer
    paths = sorted(graphs.glob("*.pt"))
    events = GraphRecordDataset(paths)
    torch.manual_seed(0)
    first = events[0]
    module = GNNModule(InteractionGNN(first.x.shape[1], edge_features=0, **MODEL),
                       graph_ops="csr")
    optimiser = torch.optim.AdamW(module.parameters(), lr=1e-3)
    if task == "whole":
        batches = iter(lambda: first, None)            # the same event at every step
    else:
        config = SamplingConfig(**SAMPLING)
        batches = (b for epoch in range(10**6)
                   for b in SampledMinibatches(events, config, seed=epoch))
    times, edges, rss = [], 0, []
    for step in range(steps + 1):
        data = next(batches)
        if step == 1:
            user0, system0 = cpu_seconds()
        start = time.perf_counter()
        loss = module.training_step(data, step)
        optimiser.zero_grad(set_to_none=True)
        loss.backward()
        optimiser.step()
        if step >= 1:
            times.append(time.perf_counter() - start)
            edges += int(data.edge_index.shape[1])
            rss.append(rss_kib() / 2**20)
    user, system = (b - a for a, b in zip((user0, system0), cpu_seconds()))
    return {"allocator": allocator.active(), "steps": steps,
            "median_step_s": statistics.median(times),
            "edges_per_s": edges / sum(times), "user_s": user, "system_s": system,
            "system_share": system / (user + system), "rss_gb_by_step": rss,
            "peak_rss_gb": peak_rss_kib() / 2**20}


def main() -> int:
    parser = harness.parser(__doc__)
    parser.add_argument("--infer-events", type=Path, help="events for trkx infer")
    parser.add_argument("--graphs", type=Path, help="filter-stage records (trkx infer --graphs)")
    parser.add_argument("--allocators", nargs="+", choices=ALLOCATORS,
                        default=[a for a in ALLOCATORS
                                 if a not in allocator.PRELOADED or allocator.library_of(a)])
    parser.add_argument("--whole-steps", type=int, default=3)
    parser.add_argument("--sampled-steps", type=int, default=100)
    parser.add_argument("--growth-steps", type=int, nargs=2, default=(50, 500),
                        metavar=("FIRST", "LAST"),
                        help="RSS after these sampled steps, for trkx's default allocator")
    parser.add_argument("--child", choices=("whole", "sampled"), help=argparse.SUPPRESS)
    parser.add_argument("--steps", type=int, help=argparse.SUPPRESS)
    args = harness.parse(parser)
    if args.child:
        print(json.dumps(child(args.child, args.graphs, args.steps)))
        return 0
    result: dict = {"model": MODEL, "sampling": SAMPLING, "infer": {}, "whole": {},
                    "sampled": {}}
    for name in args.allocators:
        if args.infer_events:
            row = result["infer"][name] = measure_infer(args.infer_events, name)
            print(f"infer {name}: total {row['stage_seconds']['total']:.1f} s, user "
                  f"{row['user_s']:.1f} s, system {row['system_s']:.1f} s, peak "
                  f"{row['peak_rss_gb']:.2f} GB", flush=True)
        if args.graphs:
            for task, steps in (("whole", args.whole_steps), ("sampled", args.sampled_steps)):
                if task == "sampled" and name == args.allocators[0]:
                    steps = max(steps, args.growth_steps[1])
                row = result[task][name] = measure_training(task, args.graphs, name, steps)
                print(f"{task} {name}: {row['median_step_s']:.3f} s/step, "
                      f"{row['edges_per_s']:.0f} edges/s, user {row['user_s']:.1f} s, system "
                      f"{row['system_s']:.1f} s, peak {row['peak_rss_gb']:.2f} GB", flush=True)
    base, default = "before", args.allocators[0]
    summary = {}
    if base in result["infer"] and default in result["infer"]:
        summary["infer_speedup"] = (result["infer"][base]["stage_seconds"]["total"]
                                    / result["infer"][default]["stage_seconds"]["total"])
    for task in ("whole", "sampled"):
        if base in result[task] and default in result[task]:
            summary[f"{task}_step_speedup"] = (result[task][base]["median_step_s"]
                                               / result[task][default]["median_step_s"])
    sampled = result["sampled"].get(default)
    if sampled and len(sampled["rss_gb_by_step"]) >= args.growth_steps[1]:
        first, last = (sampled["rss_gb_by_step"][s - 1] for s in args.growth_steps)
        summary["rss_growth"] = {"steps": list(args.growth_steps), "rss_gb": [first, last],
                                 "ratio": last / first}
    result["summary"] = summary
    print(json.dumps(summary, indent=2))
    harness.write_json(args.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
