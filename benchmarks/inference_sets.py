"""The cells path's cost: the two model sets on one real event with cells, back to back.

    python benchmarks/inference_sets.py $TRKX_DATA/real_pixel_truth/event000021001 \
        --threads 2 [--repeats 3] [--cells-models DIR] [--json out.json]

The cells set runs on the event with its cells read, the hits-only set (trkx/models/pu200) on
the same event's hits, alternating ``--repeats`` times in this process, each pass warmed up on
the event first (benchmarks/inference.py's ``run_pass``: load, every stage, the track
parameters and the tracks CSV written). Per set: the median seconds per stage and each learned
stage's roofline figures (``summarize_pass``); ``ratio`` = the cells set's median seconds per
event (load to write) over the hits-only set's, issue 47's figure (target <= 1.2);
``pass_ratios``, the same ratio for each pair of neighbouring passes: its spread is the noise
of the machine.
``--cells-models DIR`` times a candidate cells set (a folder with ``pipeline.yaml`` and the
three model files, e.g. one ``trkx.packaging.package`` wrote) instead of the shipped one, so a
change is measured before it ships.

``peak_memory_gb``: per set, the peak resident memory of a separate ``trkx infer`` process
that reconstructs the event's folder with that set (its ``timing.json``), what a user's
command takes.
"""

from __future__ import annotations

if __name__ == "__main__":
    import harness
    harness.start()

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import harness
import torch
from inference import matmul_rates, memory_bandwidth, run_pass, summarize_pass

REPO = harness.REPO
SETS = ("pu200_cells", "pu200")


def model_folders(cells_models: Path | None) -> dict[str, Path]:
    """Each set's folder (``pipeline.yaml`` and its model files): the shipped ones, the cells
    set replaced by ``cells_models`` when given."""
    from trkx.models import shipped_models

    folders = {name: Path(shipped_models(name).checkpoints) for name in SETS}
    if cells_models is not None:
        if not (cells_models / "pipeline.yaml").is_file():
            raise SystemExit(f"--cells-models {cells_models}: no pipeline.yaml there")
        folders["pu200_cells"] = cells_models
    return folders


def sets_on_event(prefix: str, folders: dict[str, Path], repeats: int, scratch: Path) -> dict:
    """Both sets on the event ``prefix``, alternating ``repeats`` times (module docstring)."""
    from trkx.pipeline.inference import TrainedPipeline

    rates = {**matmul_rates(), "memory_bandwidth": memory_bandwidth()}
    sets = {name: TrainedPipeline.load(folder / "pipeline.yaml", folder, device="cpu")
            for name, folder in folders.items()}
    if not sets["pu200_cells"].use_cells or sets["pu200"].use_cells:
        raise SystemExit("the cells set must read cells and the hits-only set must not")
    rows: dict[str, list] = {name: [] for name in sets}
    for _ in range(repeats):
        for name, pipeline in sets.items():
            rows[name] += run_pass(pipeline, [prefix], False, scratch)["rows"]
    summaries = {name: summarize_pass(sets[name], {"rows": found, "evaluations": [],
                                                   "recalls": []}, rates)
                 for name, found in rows.items()}
    passes = [cells["total"] / hits["total"]             # each pair of neighbouring passes
              for cells, hits in zip(rows["pu200_cells"], rows["pu200"])]
    return {"event": prefix, "repeats": repeats, "machine": rates, "sets": summaries,
            "models": {name: str(folder) for name, folder in folders.items()},
            "ratio": summaries["pu200_cells"]["end_to_end_seconds"]
            / summaries["pu200"]["end_to_end_seconds"],
            "pass_ratios": passes}


def peak_memory_gb(prefix: str, folder: Path, threads: int, scratch: Path) -> float:
    """Peak resident memory (GB) of a ``trkx infer`` process reconstructing the folder of
    ``prefix``'s event with the set in ``folder`` (its ``timing.json``: the process's own
    high-water mark)."""
    events = Path(prefix).parent
    event = Path(prefix).name
    link = scratch / "event"                  # a folder holding only this event's files
    link.mkdir(exist_ok=True)
    for path in events.glob(f"{event}-*"):
        target = link / path.name
        if not target.exists():
            target.symlink_to(path.resolve())
    out = scratch / f"out_{folder.name}"
    subprocess.run([sys.executable, "-m", "trkx", "--threads", str(threads), "infer",
                    "--config", str(folder / "pipeline.yaml"), "--checkpoints", str(folder),
                    "--events", str(link), "--out", str(out), "--no-evaluate"],
                   cwd=REPO, stdout=subprocess.DEVNULL, check=True)
    return float(json.loads((out / "timing.json").read_text())["peak_memory_gb"])


def main() -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("prefix", help="an event with cells: dir/eventNNNNNNNNN")
    parser.add_argument("--repeats", type=int, default=3, help="passes of each set (default 3)")
    parser.add_argument("--cells-models", type=Path, default=None,
                        help="a candidate cells set's folder instead of the shipped one")
    args = harness.parse(parser)
    torch.set_num_threads(args.threads)
    folders = model_folders(args.cells_models)
    with tempfile.TemporaryDirectory() as scratch_dir:
        scratch = Path(scratch_dir)
        figures = sets_on_event(args.prefix, folders, args.repeats, scratch)
        figures["peak_memory_gb"] = {name: peak_memory_gb(args.prefix, folder, args.threads,
                                                          scratch)
                                     for name, folder in folders.items()}
    for name, result in figures["sets"].items():
        print(f"{name}: median s " + ", ".join(
            f"{s} {v:.3f}" for s, v in result["stage_seconds"].items()) + "; roofline "
            + ", ".join(f"{s} {v['roofline_fraction']:.2f}"
                        for s, v in result["stage_roofline"].items())
            + f"; peak memory {figures['peak_memory_gb'][name]:.2f} GB")
    print(f"cells set / hits-only set: {figures['ratio']:.2f} (per pass "
          + ", ".join(f"{r:.2f}" for r in figures["pass_ratios"]) + ")")
    harness.write_json(args.json, figures)


if __name__ == "__main__":
    main()
