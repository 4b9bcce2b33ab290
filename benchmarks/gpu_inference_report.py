"""The report of benchmarks/gpu_inference.sh: what each `trkx infer` run of the GPU check gave.

    python benchmarks/gpu_inference_report.py RESULTS

RESULTS holds one folder per run (``real-cells-gpu``, ``real-cells-cpu``, ``real-hits-*``,
``kaggle-*``: tracks, timing.json, evaluate/pixel_truth.json) and status.txt (name, exit code,
wall seconds, one line per run). Printed, and written to RESULTS/gpu_inference.json:

- per run: its exit code and wall seconds (loading included), the device and GPU, the models,
  the mean seconds per stage and events/s of timing.json, and the efficiency, fake and
  duplicate rates on the pixel truth of the real event (21001) when it was evaluated;
- per event of each GPU / CPU pair: the hits whose track differs (the hits sharing its track
  are not the same) and the tracks of >= 3 hits found on one device only.

A run that failed or never ran is reported as such; the report itself never fails on it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd

STAGES = ("load", "embedding", "graph", "filter", "gnn", "tracks", "parameters", "write",
          "total")


def run_summary(folder: Path, rc: int | None, wall: int | None) -> dict:
    """One run's figures (what exists of them)."""
    out: dict = {"exit_code": rc, "wall_seconds": wall}
    timing = folder / "timing.json"
    if timing.is_file():
        t = json.loads(timing.read_text())
        out.update({k: t.get(k) for k in ("device", "gpu", "precision", "models",
                                         "events_per_second", "workers")})
        out["mean_seconds"] = {k: v for k, v in (t.get("mean_seconds") or {}).items()
                               if k in STAGES}
        out["events"] = len(t.get("events") or {})
        out["threads_per_worker"] = t.get("threads_per_worker")
    pixel = folder / "evaluate" / "pixel_truth.json"
    if pixel.is_file():
        p = json.loads(pixel.read_text())
        out["pixel_truth"] = {k: p.get(k) for k in (
            "efficiency", "fake_rate", "duplicate_rate", "efficiency_prompt",
            "efficiency_secondary", "n_signal_particles")}
    return out


def tracks(frame: pd.DataFrame) -> set[frozenset]:
    groups = frame.groupby("track_id").hit_id.apply(frozenset)
    return {g for g in groups if len(g) >= 3}


def differences(gpu_folder: Path, cpu_folder: Path) -> dict:
    """Per event of the pair: hits in another track, tracks on one device only."""
    report = {}
    for cpu_file in sorted(cpu_folder.glob("event*-tracks.csv")):
        gpu_file = gpu_folder / cpu_file.name
        if not gpu_file.is_file():
            report[cpu_file.name] = "missing on the GPU"
            continue
        cpu = pd.read_csv(cpu_file).sort_values("hit_id", ignore_index=True)
        gpu = pd.read_csv(gpu_file).sort_values("hit_id", ignore_index=True)
        if not (cpu.hit_id.to_numpy() == gpu.hit_id.to_numpy()).all():
            report[cpu_file.name] = "different hits"
            continue
        on_cpu, on_gpu = tracks(cpu), tracks(gpu)
        mate_cpu = cpu.groupby("track_id").hit_id.transform("min").to_numpy()
        mate_gpu = gpu.groupby("track_id").hit_id.transform("min").to_numpy()
        report[cpu_file.name] = {
            "identical_file": cpu_file.read_bytes() == gpu_file.read_bytes(),
            "hits": len(cpu), "hits_in_another_track": int((mate_cpu != mate_gpu).sum()),
            "tracks_cpu": len(on_cpu), "tracks_only_cpu": len(on_cpu - on_gpu),
            "tracks_only_gpu": len(on_gpu - on_cpu)}
    return report


def main(results: Path) -> dict:
    status = {}
    if (results / "status.txt").is_file():
        for line in (results / "status.txt").read_text().splitlines():
            name, rc, wall = line.split()
            status[name] = (int(rc), int(wall))
    report: dict = {"runs": {}, "differences": {}}
    setup = results / "setup.log"
    if setup.is_file():
        report["setup"] = setup.read_text().strip().splitlines()
    for name in ("real-cells", "real-hits", "kaggle"):
        for run in ("gpu", "cpu"):
            key = f"{name}-{run}"
            rc, wall = status.get(key, (None, None))
            report["runs"][key] = run_summary(results / key, rc, wall)
        if all((results / f"{name}-{run}").is_dir() for run in ("gpu", "cpu")):
            report["differences"][name] = differences(results / f"{name}-gpu",
                                                      results / f"{name}-cpu")
    (results / "gpu_inference.json").write_text(json.dumps(report, indent=1, default=str))
    for key, run in report["runs"].items():
        seconds = " ".join(f"{k} {v:.3f}" for k, v in (run.get("mean_seconds") or {}).items())
        pixel = run.get("pixel_truth")
        physics = (f"  21001: eff {pixel['efficiency']:.3f} fake {pixel['fake_rate']:.3f}"
                   if pixel and pixel.get("efficiency") is not None else "")
        print(f"{key:16s} rc {run['exit_code']} wall {run['wall_seconds']} s "
              f"{run.get('device') or '-'} {run.get('events_per_second') or 0:.3f} ev/s "
              f"{seconds}{physics}")
    for name, events in report["differences"].items():
        for event, d in events.items():
            if isinstance(d, str):
                print(f"{name} {event}: {d}")
                continue
            print(f"{name} {event}: {d['hits_in_another_track']} of {d['hits']} hits in "
                  f"another track, tracks only on the CPU {d['tracks_only_cpu']}, only on the "
                  f"GPU {d['tracks_only_gpu']} of {d['tracks_cpu']}"
                  + (" (identical file)" if d["identical_file"] else ""))
    print(f"-> {results / 'gpu_inference.json'}")
    return report


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", type=Path, help="the folder gpu_inference.sh wrote")
    args = parser.parse_args()
    if not args.results.is_dir():
        print(f"gpu_inference_report.py: {args.results}: no such folder", file=sys.stderr)
        sys.exit(2)
    main(args.results)
