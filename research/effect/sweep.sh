#!/usr/bin/env bash
# Issue 56's training-side sweep: a few effect-map settings, each 600 steps on the cached vectors
# (minutes in all on two CPU cores), judged on the run's own held-out 10 % of training queries
# (validation top-1, grouped and plain queries apart), never on the dev figures:
#   bash research/effect/sweep.sh            # runs under runs/effect-sweep/NAME
set -euo pipefail
cd "$(dirname "$0")/../.."
RECIPE=instemb_rag/training/recipes/instruction-effect.yaml
run() {
  local name="$1"; shift
  [ -d "runs/effect-sweep/$name/final" ] && return
  .venv/bin/instemb-rag train --config "$RECIPE" --set "training.output_dir=runs/effect-sweep/$name" \
    --set training.show_progress=false "$@" > "runs/effect-sweep/$name.log" 2>&1
}
mkdir -p runs/effect-sweep
run base
run rank0 --set effect.rank=0
run strength1 --set effect.instruction_strength=1.0
run strength2 --set effect.instruction_strength=2.0
run rank64 --set effect.rank=64
for log in runs/effect-sweep/*.log; do
  echo "== $(basename "$log" .log): $(grep -m1 'validation top-1 at step 0' "$log" | sed 's/.*: //')"
  tail -n 1 "runs/effect-sweep/$(basename "$log" .log)/metrics.jsonl" 2>/dev/null
done
