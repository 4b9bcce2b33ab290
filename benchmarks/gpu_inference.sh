#!/usr/bin/env bash
# GPU check of `trkx infer --device cuda` (issues 39, 47), in one call on a fresh GPU machine:
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
# status.txt (name, exit code, wall seconds) and gpu_inference.json (benchmarks/
# gpu_inference_report.py). Every step runs whatever the earlier ones did, each under its own
# time limit (STEP_TIMEOUT seconds, default 150); on exit, whatever failed, the report runs,
# every log is gathered into gpu_inference.txt, and that, the JSON and status.txt are copied to
# $OUT (the device machine's folder that comes back: 8 files at most).
# GPU_DEVICE=cpu runs the script without a GPU (CPU against CPU: no differences), to check it;
# KAGGLE_EVENTS=N limits the Kaggle files (default: all 11). About 4-5 minutes on an H100/H200
# machine (16 cores; the CPU runs take most of it).
set -uo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PY=${PYTHON:-python3}
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
  "$PY" "$REPO/benchmarks/gpu_inference_report.py" "$RESULTS" 2>&1 | tee "$RESULTS/report.log"
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
