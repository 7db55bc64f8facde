#!/usr/bin/env bash
# Short training runs for the ablation report (docs/ablations.md): MSE vs KL distillation,
# each contrastive view removed, teacher targets without the answer's stopwords
# (distill_content_words; its teacher targets are cached under their own key), and the pooled
# retrieval loss with in-batch negatives only vs with a memory of the last 64 documents. Every run uses
# the default recipe's data, teacher cache and seed, differs in one option, and trains ABLATION_STEPS steps (default 30: on a 2-core CPU one
# step of 8 examples takes ~9 s, so the nine runs take ~45 min; raise it on a GPU. At 15 steps
# the models were still indistinguishable from the untrained backbone on the dev sets).
# Finished runs are skipped, interrupted ones resume; ABLATION_ONLY="name ..." trains only those. The named LLM folders (each run's final/) land in
# ABLATION_NAMED (default runs/ablation-checkpoints)/<name>, the folder that
# `python -m tools.reports.ablations --checkpoints-dir` reads.
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS="${ABLATION_STEPS:-30}"
RECIPE=instemb_rag/training/recipes/default.yaml
CLI="${INSTEMB_CLI:-.venv/bin/instemb-rag}"
OUT="${ABLATION_OUT:-runs/ablations}"
NAMED="${ABLATION_NAMED:-runs/ablation-checkpoints}"
mkdir -p "$OUT" "$NAMED"

declare -A RUNS=(
  [loss-mse]=""
  [loss-kl]="--set training.distill_loss=kl"
  [views-no-student_input]="--set training.views=[student_input_dropout,teacher_input,student_output]"
  [views-no-student_input_dropout]="--set training.views=[student_input,teacher_input,student_output]"
  [views-no-teacher_input]="--set training.views=[student_input,student_input_dropout,student_output]"
  [views-no-student_output]="--set training.views=[student_input,student_input_dropout,teacher_input]"
  [targets-content-words]="--set training.distill_content_words=true"
  [negatives-in-batch]="--set training.retrieval_weight=1.0"
  [negatives-memory-64]="--set training.retrieval_weight=1.0 --set training.negative_memory=64"
)
ALL="loss-mse targets-content-words loss-kl negatives-in-batch negatives-memory-64 views-no-student_input
  views-no-student_input_dropout views-no-teacher_input views-no-student_output"
for name in ${ABLATION_ONLY:-$ALL}; do
  if [ -z "${RUNS[$name]+set}" ]; then
    echo "error: ABLATION_ONLY names '$name'; the runs are: $ALL" >&2; exit 2
  fi
  if [ -f "$NAMED/$name/instemb_config.json" ]; then
    echo "== $name: done (remove $NAMED/$name to retrain)"; continue
  fi
  echo "== $name ($STEPS steps)"
  # shellcheck disable=SC2086
  "$CLI" train --config "$RECIPE" --max-steps "$STEPS" --output-dir "$OUT/$name" --resume \
    --set training.save_steps=5 --set training.warmup_steps=2 --set training.show_progress=false \
    --set training.teacher_cache_dir=runs/default/teacher_cache --set data.build_dir=runs/default/data \
    ${RUNS[$name]}
  rm -rf "$NAMED/$name.tmp" && cp -r "$OUT/$name/final" "$NAMED/$name.tmp" && mv "$NAMED/$name.tmp" "$NAMED/$name"
done
