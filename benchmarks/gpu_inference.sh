#!/usr/bin/env bash
# GPU check of `trkx infer --device cuda` (issue 39): time per stage on CUDA and on the CPU, and
# how many tracks differ between the two, on the real event 21001 and the 11 Kaggle hit files.
#
#   TRKX_DATA=DIR bash benchmarks/gpu_inference.sh [OUT]
#
# DIR holds real_pixel_truth/ and kaggle_hits/ (default: ../shared/data/trackml beside the
# checkout, else runs/gpu_data/ in it: for the device machine, which gets the checkout only,
# copy those two folders into runs/gpu_data/ (ignored, ~20 MB) and carry it). OUT (default: a
# temporary folder) receives one folder per (events, device) run with its tracks and
# timing.json, the logs, and gpu_inference.json: mean seconds per stage of each run, events/s, the device and GPU name,
# and per event the hits whose track differs and the tracks (>= 3 hits) found on one device
# only. The shipped pu200 models (hits only), fp32, in this checkout (PYTHONPATH): about
# 3-5 minutes on an H100 machine (16 cores; the CPU runs take most of it).
# GPU_DEVICE=cpu runs the script without a GPU (CPU against CPU: no differences), to check it.
# Where $OUT is set (the device machine's folder that comes back, 8 files at most), the logs
# and gpu_inference.json are copied there too.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DATA=${TRKX_DATA:-}
if [[ -z $DATA ]]; then
  for candidate in "$REPO/../shared/data/trackml" "$REPO/runs/gpu_data"; do
    [[ -d $candidate/kaggle_hits ]] && DATA=$candidate && break
  done
fi
[[ -n $DATA && -d $DATA/real_pixel_truth && -d $DATA/kaggle_hits ]] || {
  echo "gpu_inference.sh: no real_pixel_truth/ and kaggle_hits/ under TRKX_DATA=${DATA:-unset}" >&2
  exit 2; }
RESULTS=${1:-$(mktemp -d)}
PY=${PYTHON:-python3}
GPU=${GPU_DEVICE:-cuda}
export PYTHONPATH=$REPO${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 TRKX_DATA=$DATA
mkdir -p "$RESULTS"
[[ $GPU == cpu ]] || "$PY" -c "import torch; assert torch.cuda.is_available(), 'no CUDA'; \
print('torch', torch.__version__, torch.cuda.get_device_name())"
cd "$REPO"
for events in real_pixel_truth kaggle_hits; do
  for run in cuda cpu; do
    device=$run; [[ $run == cuda ]] && device=$GPU
    # CPU Kaggle events in 4 processes (tracks equal the one-process loop's: tested)
    workers=1; [[ $run == cpu && $events == kaggle_hits ]] && workers=4
    echo "== $events on $device ($workers worker(s))"
    start=$SECONDS
    "$PY" -m trkx infer --events "$DATA/$events" --out "$RESULTS/$events-$run" \
      --device "$device" --workers "$workers" 2>&1 | tr '\r' '\n' \
      | grep -v "s/event\]\|event/s\]\|it/s\]" | tee "$RESULTS/$events-$run.log"
    echo "wall $((SECONDS - start)) s (loading included)" | tee -a "$RESULTS/$events-$run.log"
  done
done
"$PY" - "$RESULTS" <<'EOF'
import json, sys
from pathlib import Path

import pandas as pd

results = Path(sys.argv[1])
report = {"runs": {}, "differences": {}}
for timing in sorted(results.glob("*-*/timing.json")):
    t = json.loads(timing.read_text())
    report["runs"][timing.parent.name] = {
        k: t[k] for k in ("device", "gpu", "precision", "mean_seconds", "events_per_second",
                          "workers", "threads_per_worker")}


def tracks(frame: pd.DataFrame) -> set[frozenset]:
    groups = frame.groupby("track_id").hit_id.apply(frozenset)
    return {g for g in groups if len(g) >= 3}


for events in ("real_pixel_truth", "kaggle_hits"):
    for cpu_file in sorted((results / f"{events}-cpu").glob("event*-tracks.csv")):
        cuda = pd.read_csv(results / f"{events}-cuda" / cpu_file.name).sort_values("hit_id")
        cpu = pd.read_csv(cpu_file).sort_values("hit_id")
        assert (cpu.hit_id.to_numpy() == cuda.hit_id.to_numpy()).all()
        on_cpu, on_cuda = tracks(cpu), tracks(cuda)
        # a hit differs when the hits sharing its track differ
        mate_cpu = cpu.groupby("track_id").hit_id.transform("min").to_numpy()
        mate_cuda = cuda.groupby("track_id").hit_id.transform("min").to_numpy()
        report["differences"][cpu_file.name] = {
            "identical_file": cpu_file.read_bytes() == (results / f"{events}-cuda" /
                                                        cpu_file.name).read_bytes(),
            "hits": len(cpu), "hits_in_another_track": int((mate_cpu != mate_cuda).sum()),
            "tracks_cpu": len(on_cpu), "tracks_only_cpu": len(on_cpu - on_cuda),
            "tracks_only_cuda": len(on_cuda - on_cpu)}
(results / "gpu_inference.json").write_text(json.dumps(report, indent=1))
for name, run in report["runs"].items():
    print(f"{name:24s} {run['device']:7s} {run['events_per_second']:.3f} events/s  " +
          " ".join(f"{k} {v:.3f}" for k, v in run["mean_seconds"].items()))
for name, d in report["differences"].items():
    print(f"{name}: {d['hits_in_another_track']} of {d['hits']} hits in another track, "
          f"tracks only on CPU {d['tracks_only_cpu']}, only on CUDA {d['tracks_only_cuda']} "
          f"of {d['tracks_cpu']}" + (" (identical file)" if d["identical_file"] else ""))
print(f"-> {results / 'gpu_inference.json'}")
EOF
if [[ -n ${OUT:-} && -d $OUT ]]; then
  cp "$RESULTS"/gpu_inference.json "$RESULTS"/*.log "$OUT"/
fi
