"""Graph-parallel training of the pile-up-200 GNN on pipeline graphs: ``torchrun`` with P
processes against one process, the same optimiser steps on the same event.

Both runs go through ``trkx train gnn`` (the one training driver): one process with
``configs/gnn.yaml``, P processes with ``torchrun --nproc-per-node P -m trkx train gnn --config
configs/gnn_distributed.yaml``, both with the pile-up-200 recipe's GNN (``configs/pu200.yaml``:
hidden 64, 6 iterations, learning rate 0.002) on one filter-stage training event for
``--steps`` whole-event steps, validated on one other event. One training event because the
two drivers' samplers order several events differently (the steps must be the same). Prints
and writes the validation figures of both runs, their largest difference and the wall time of
each run (setup and validation included).

    python benchmarks/distributed_training.py --events runs/pu200/graphs/test/filter \\
        --steps 6 --json benchmarks/results/distributed_training.json
"""

from __future__ import annotations

if __name__ == "__main__":
    import harness
    harness.start()

import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import harness
from harness import REPO, free_port

RECIPE = ["model.hidden=64", "model.n_graph_iters=6", "module.learning_rate=0.002",
          "module.graph_ops=csr", "module.tune_tracks=false", "trainer.logger=none",
          "trainer.progress_bar=false", "trainer.min_signal_efficiency=0.0"]
FIGURES = ("val_loss", "val_efficiency", "val_purity", "val_auc")


def figures(metrics: dict) -> dict[str, float | None]:
    """The validation figures; None where undefined (purity with no edge above the cut)."""
    return {k: None if math.isnan(float(metrics[k])) else float(metrics[k]) for k in FIGURES}


def max_difference(one: dict, many: dict) -> float | None:
    """Largest |difference| of the figures both runs define; None if one defines a figure the
    other does not (that is a difference too)."""
    if any((one[k] is None) != (many[k] is None) for k in FIGURES):
        return None
    return max(abs(many[k] - one[k]) for k in FIGURES if one[k] is not None)


def run(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    result = subprocess.run(argv, cwd=REPO, env={**os.environ, **env}, text=True,
                            capture_output=True)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:8])} ... failed:\n{result.stderr[-3000:]}")
    return time.perf_counter() - start


def main() -> int:
    parser = harness.parser(__doc__, events="filter-stage event records (the first trains, "
                            "the last validates)")
    parser.add_argument("--steps", type=int, default=6, help="whole-event optimiser steps")
    parser.add_argument("-P", "--processes", type=int, default=2)
    args = harness.parse(parser)       # --threads: one process uses them all, P share them
    if args.events is None:
        parser.error("--events DIR is required")
    from trkx.data.listing import record_paths
    from trkx.files.checkpoint import load_checkpoint
    paths = record_paths(str(args.events))
    if len(paths) < 2:
        raise SystemExit(f"{args.events}: needs two event records (train, validate)")
    work = Path(tempfile.mkdtemp(prefix="trkx_dist_train_"))
    for name, path in (("train", paths[0]), ("val", paths[-1])):
        (work / name).mkdir()
        (work / name / path.name).symlink_to(path.resolve())
    sets = [*RECIPE, f"data.train_dir={work / 'train'}", f"data.val_dir={work / 'val'}",
            f"trainer.max_steps={args.steps}",
            f"trainer.val_every_n_epochs={args.steps}"]     # one event: an epoch is a step
    flags = [item for s in sets for item in ("--set", s)]
    single_ckpt, parallel_ckpt = work / "single.pt", work / "parallel.pt"
    print(f"one process x {args.threads} threads: {args.steps} steps on {paths[0].name}",
          flush=True)
    single_s = run([sys.executable, "-m", "trkx", "--threads", str(args.threads), "train",
                    "gnn", "--config", "configs/gnn.yaml", "--checkpoint", str(single_ckpt),
                    *flags], {})
    threads = max(1, args.threads // args.processes)
    print(f"torchrun {args.processes} processes x {threads} thread(s)", flush=True)
    parallel_s = run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node",
                      str(args.processes), "--master-port", str(free_port()), "-m", "trkx",
                      "train", "gnn", "--config", "configs/gnn_distributed.yaml",
                      "--checkpoint", str(parallel_ckpt), *flags],
                     {"OMP_NUM_THREADS": str(threads)})
    one = figures(load_checkpoint(single_ckpt, "gnn").metrics)
    many = figures(load_checkpoint(parallel_ckpt, "gnn").metrics)
    result = {"events": str(args.events), "train_event": paths[0].name,
              "val_event": paths[-1].name, "steps": args.steps, "processes": args.processes,
              "recipe": RECIPE, "one_process": one, "graph_parallel": many,
              "max_abs_difference": max_difference(one, many),
              "wall_seconds": {"one_process": single_s, "graph_parallel": parallel_s},
              "wall_ratio": parallel_s / single_s}
    difference = result["max_abs_difference"]
    for k in FIGURES:
        print(f"  {k}: one process {one[k]}  P={args.processes} {many[k]}")
    print(f"max |difference| {difference}; wall {single_s:.0f} s vs {parallel_s:.0f} s")
    harness.write_json(args.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
