#!/usr/bin/env bash
# One round of issue 56's dev figures, for trained candidates copied under research/checkpoints/:
#   bash research/effect/round.sh REPORT_DIR [CANDIDATE ...]
# Composes the untrained instruction-effect arrangement at strengths 1, 1.5 and 2 (the line a
# trained candidate must beat: the shipped LLM and all-MiniLM-L6-v2 as they ship), then for the
# candidates and the three untrained points, beside today's default and MiniLM with the
# instruction pasted (each computed once and reused):
# - scripts/dev_report.sh: the facet groups (58 dev groups, Factbook), SciFact with its
#   instruction, the pooled stance figure per set and label, the negation pairs, paired intervals;
# - SciFact without any instruction (the same 100 held-out claims and pool);
# - the user's own files (eval_sets/own_files: right listing first, of 12).
# Then `python research/effect/ship_rule.py REPORT_DIR NAME` gives each verdict.
set -euo pipefail
cd "$(dirname "$0")/../.."
REPORT="$1"; shift
INSTEMB=".venv/bin/instemb-rag"
SEEN="${SEEN:-runs/qtower/seen_records.jsonl}"
mkdir -p "$REPORT"
untrained=()
for strength in 1 1.5 2; do
  folder="runs/effect-untrained-$strength"
  [ -e "$folder/instemb_parts.json" ] || "$INSTEMB" compose --arrangement effect --instruction-strength "$strength" --out "$folder"
  untrained+=("$folder")
done
bash scripts/dev_report.sh "$REPORT" "$@" "${untrained[@]}"
label() { case "$1" in default) echo default ;; pasted:*) echo pasted ;; *) basename "$1" ;; esac; }
for model in default pasted:minilm "$@" "${untrained[@]}"; do
  out="$REPORT/scifact-noinst_$(label "$model").json"
  [ -s "$out" ] && continue
  echo "+ instemb-rag eval scifact --model $model --instruction ''" >&2
  "$INSTEMB" eval scifact --model "$model" --instruction '' --max-queries 100 --max-docs 300 \
    --exclude-seen "$SEEN" --no-progress -o "$out"
done
[ -s "$REPORT/own_files.json" ] || .venv/bin/python research/effect/own_files.py "$REPORT/own_files.json" \
  default pasted:minilm "$@" "${untrained[@]}"
