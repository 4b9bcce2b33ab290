#!/usr/bin/env bash
# GPU check of `trkx infer --device cuda`, in one call on a fresh GPU machine:
# both shipped sets on the real event 21001 (the cells set, as `trkx infer` chooses it, and the
# hits-only set on the same event's hits), and the hits-only set on the 11 Kaggle hit files,
# each on the GPU and on the CPU. Reported per run: mean seconds per stage, events/s, the
# efficiency / fake rate on 21001's pixel truth; per pair: the tracks found on one device only.
#
#   bash benchmarks/gpu_inference.sh --stage-data   # here: copy the data into runs/gpu_data/
#   TRKX_DATA=DIR bash benchmarks/gpu_inference.sh [RESULTS]
#
# DIR holds real_pixel_truth/ and kaggle_hits/ (default: ../shared/data/trackml beside the
# checkout, else runs/gpu_data/ in it). The device machine gets the checkout alone: stage the
# data (about 20 MB; runs/ is ignored) and carry runs/gpu_data with the call. RESULTS (default:
# a temporary folder) receives one folder per run (tracks, timing.json, evaluate/), its log,
# status.txt (name, exit code, wall seconds) and gpu_inference.json (the report below;
# `bash benchmarks/gpu_inference.sh --report RESULTS` writes it again). Every step runs whatever the earlier ones did, each under its own
# time limit (STEP_TIMEOUT seconds, default 150); on exit, whatever failed, the report runs,
# every log is gathered into gpu_inference.txt, and that, the JSON and status.txt are copied to
# $OUT (the device machine's folder that comes back: 8 files at most).
# GPU_DEVICE=cpu runs the script without a GPU (CPU against CPU: no differences), to check it;
# KAGGLE_EVENTS=N limits the Kaggle files (default: all 11). About 4-5 minutes on an H100/H200
# machine (16 cores; the CPU runs take most of it).
set -uo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PY=${PYTHON:-python3}
report() {  # report RESULTS: gpu_inference.json and the printed summary (what each run gave:
  # exit code, wall seconds, device, mean seconds per stage, events/s, 21001's pixel-truth
  # figures; per event of each GPU / CPU pair, the hits whose track differs and the tracks of
  # >= 3 hits found on one device only; a run that failed or never ran is reported as such)
  "$PY" - "$1" <<'PYEOF'
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


main(Path(sys.argv[1]))
PYEOF
}
if [[ ${1:-} == -h || ${1:-} == --help ]]; then   # the header above, without the '#'
  sed -n '2,/^set -uo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
  exit 0
fi
if [[ ${1:-} == -* && ${1:-} != --report && ${1:-} != --stage-data ]]; then
  echo "gpu_inference.sh: unknown option ${1} (--help, --stage-data, --report RESULTS)" >&2
  exit 2
fi
if [[ ${1:-} == --report ]]; then
  [[ -d ${2:-} ]] || { echo "gpu_inference.sh: ${2:-(none)}: no such folder" >&2; exit 2; }
  report "$2"
  exit $?
fi
if [[ ${1:-} == --stage-data ]]; then
  source=${TRKX_DATA:-$REPO/../shared/data/trackml}
  mkdir -p "$REPO/runs/gpu_data"
  cp -r "$source/real_pixel_truth" "$source/kaggle_hits" "$REPO/runs/gpu_data/" || exit 2
  du -sh "$REPO/runs/gpu_data"
  exit 0
fi
DATA=${TRKX_DATA:-}
if [[ -z $DATA ]]; then
  for candidate in "$REPO/../shared/data/trackml" "$REPO/runs/gpu_data"; do
    [[ -d $candidate/kaggle_hits ]] && DATA=$candidate && break
  done
fi
RESULTS=${1:-$(mktemp -d)}
mkdir -p "$RESULTS"
finish() {
  report "$RESULTS" 2>&1 | tee "$RESULTS/report.log"
  for log in "$RESULTS"/*.log; do echo "#### ${log##*/}"; cat "$log"; done \
    > "$RESULTS/gpu_inference.txt"
  if [[ -n ${OUT:-} && -d $OUT ]]; then
    cp "$RESULTS"/gpu_inference.json "$RESULTS"/gpu_inference.txt "$RESULTS"/status.txt \
      "$OUT"/ 2>/dev/null
  fi
}
trap finish EXIT
[[ -n $DATA && -d $DATA/real_pixel_truth && -d $DATA/kaggle_hits ]] || {
  echo "gpu_inference.sh: no real_pixel_truth/ and kaggle_hits/ under TRKX_DATA=${DATA:-unset}" \
    "(stage them with --stage-data and carry runs/gpu_data)" | tee "$RESULTS/setup.log" >&2
  exit 2; }
GPU=${GPU_DEVICE:-cuda}
export PYTHONPATH=$REPO${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 TRKX_DATA=$DATA
cd "$REPO"
{ echo "repo $(git rev-parse --short HEAD 2>/dev/null || echo '?'), data $DATA, GPU_DEVICE=$GPU"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 || true
  "$PY" -c "import torch, numba, torch_geometric as g; print('python', __import__('sys').version.split()[0], \
'torch', torch.__version__, 'cuda', torch.cuda.is_available(), 'numba', numba.__version__, 'pyg', g.__version__)"
  nproc; } 2>&1 | tee "$RESULTS/setup.log"
read -r HITS_CONFIG HITS_CHECKPOINTS < <("$PY" -c "from trkx.models import shipped_models as s; \
m = s('pu200'); print(m.config, m.checkpoints)")
KAGGLE=(); [[ -n ${KAGGLE_EVENTS:-} ]] && KAGGLE=(--n-events "$KAGGLE_EVENTS")

step() {  # step NAME -- trkx infer arguments
  local name=$1; shift
  echo "== $name: trkx infer $*"
  local start=$SECONDS
  timeout "${STEP_TIMEOUT:-150}" "$PY" -m trkx infer --out "$RESULTS/$name" "$@" 2>&1 \
    | tr '\r' '\n' | grep -v "s/event\]\|event/s\]\|it/s\]" > "$RESULTS/$name.log"
  local rc=${PIPESTATUS[0]}
  tail -n 4 "$RESULTS/$name.log"
  echo "$name $rc $((SECONDS - start))" | tee -a "$RESULTS/status.txt"
}
for run in gpu cpu; do
  device=cpu; [[ $run == gpu ]] && device=$GPU
  step "real-cells-$run" --events "$DATA/real_pixel_truth" --device "$device"
  step "real-hits-$run" --events "$DATA/real_pixel_truth" --device "$device" \
    --config "$HITS_CONFIG" --checkpoints "$HITS_CHECKPOINTS"
  # the CPU's Kaggle events in 4 processes (their tracks equal one process's: tested)
  workers=1; [[ $run == cpu ]] && workers=4
  step "kaggle-$run" --events "$DATA/kaggle_hits" --device "$device" --workers "$workers" \
    "${KAGGLE[@]}"
done
