#!/usr/bin/env bash
# A training recipe end to end in one call on a GPU machine:
#
#   bash scripts/gpu_retrain.sh [RECIPE] [WORKDIR]     # default configs/recipes/pu200_cells_far.yaml
#
# `trkx run RECIPE` (simulate, train and infer every stage, working points on the validation
# events, the test events' tracks and evaluation), each stage's training also capped in wall
# time so the whole call fits the device's limit: EMBEDDING_MAX_TIME, FILTER_MAX_TIME,
# GNN_MAX_TIME (trainer.max_time, DD:HH:MM:SS; default 00:00:02:00 each) and TOTAL_TIMEOUT
# seconds for the run (default 540). The recipes' learning rates are flat after warm-up, so a
# stage stopped by its cap at step N is the run of trainer.max_steps=N: the step reached is in
# the log and in each model file's metrics. EXTRA_SETS adds `trkx run --set` overrides:
# "events.workers=16" on a 16-core GPU machine (the simulation is the same whatever the
# workers), "events.train_events=2 events.val_events=1 events.test_events=1" for a check on a CPU.
#
# What comes back ($OUT on the device machine, else WORKDIR/out): the three model files as
# they appear (copied every 15 s, so a run cut short still returns its finished stages), the
# GNN's resumable last.ckpt (gnn_last.ckpt), the run's log (retrain.log), curves.tar (every
# stage's learning curves, run_summary.json, the evaluation's metrics.json) and status.txt.
set -uo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PY=${PYTHON:-python3}
RECIPE=${1:-configs/recipes/pu200_cells_far.yaml}
WORK=${2:-runs/gpu_retrain}
RESULTS=${OUT:-$WORK/out}
mkdir -p "$WORK" "$RESULTS"
export PYTHONPATH=$REPO${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
cd "$REPO" || exit 2
capped=$(dirname "$RECIPE")/.capped_$(basename "$RECIPE")
"$PY" - "$RECIPE" "$capped" <<'EOF' || exit 2
import os, sys, yaml
recipe, capped = sys.argv[1:]
config = yaml.safe_load(open(recipe))
for stage, plan in config["stages"].items():
    cap = os.environ.get(f"{stage.upper()}_MAX_TIME", "00:00:02:00")
    plan["overrides"] = [*plan.get("overrides", []), f"trainer.max_time={cap}"]
with open(capped + ".tmp", "w") as out:
    yaml.safe_dump(config, out, sort_keys=False)
os.replace(capped + ".tmp", capped)
EOF
copy_back() {
  for stage in embedding filter gnn; do
    [[ -f $WORK/checkpoints/$stage.pt ]] && cp "$WORK/checkpoints/$stage.pt" "$RESULTS/"
  done
  [[ -f $WORK/checkpoints/gnn.run/last.ckpt ]] && \
    cp "$WORK/checkpoints/gnn.run/last.ckpt" "$RESULTS/gnn_last.ckpt"
  [[ -f $WORK/retrain.log ]] && cp "$WORK/retrain.log" "$RESULTS/"
  (cd "$WORK" && tar cf "$RESULTS/curves.tar.tmp" checkpoints/*.run/logs run_summary.json \
     evaluate/metrics.json 2>/dev/null; mv -f "$RESULTS/curves.tar.tmp" "$RESULTS/curves.tar")
  return 0
}
( while sleep 15; do copy_back; done ) &
watcher=$!
start=$(date +%s)
{ echo "repo $(git rev-parse --short HEAD 2>/dev/null || echo '?'), recipe $RECIPE"
  nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>&1 || true
  "$PY" -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())"
} > "$WORK/retrain.log" 2>&1
# shellcheck disable=SC2086
timeout "${TOTAL_TIMEOUT:-540}" "$PY" -m trkx run "$capped" --workdir "$WORK" \
  $(for s in ${EXTRA_SETS:-}; do printf -- '--set %s ' "$s"; done) >> "$WORK/retrain.log" 2>&1
code=$?
kill "$watcher" 2>/dev/null
copy_back
echo "exit $code, $(( $(date +%s) - start )) s" | tee "$RESULTS/status.txt"
grep -E "^\[[0-9]+/[0-9]+\]|step|Error|error" "$WORK/retrain.log" | tr '\r' '\n' \
  | grep -v "it/s\]\|s/it\]" | tail -40
exit "$code"
