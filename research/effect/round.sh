#!/usr/bin/env bash
# One round of issue 56's (and issue 61's) dev figures, for trained candidates:
#   bash research/effect/round.sh REPORT_DIR [CANDIDATE ...]
# Composes the untrained instruction-effect arrangement at strengths 1, 1.5 and 2 (the line a
# trained candidate must beat: the shipped LLM and all-MiniLM-L6-v2 as they ship), then for the
# candidates and the three untrained points, beside today's default and MiniLM with the
# instruction pasted (each computed once and reused):
# - scripts/dev_report.sh: the facet groups (58 dev groups, Factbook), SciFact with its
#   instruction, the pooled stance figure per set and label, the negation pairs, paired intervals;
# - SciFact without any instruction (the same 100 held-out claims and pool);
# - the user's own files (eval_sets/own_files: right listing first, of 12);
# - issue 61's trap dev set (eval_sets/traps, research/effect/traps.py: each candidate paired
#   with today's default, into REPORT_DIR/traps_NAME.json).
# Then `python research/effect/ship_rule.py REPORT_DIR NAME [--rule 61]` gives each verdict.
# Environment:
# - UNTRAINED_STRENGTHS="1 1.5 2" (the default): the untrained points; "" leaves the line out;
# - SEED_DEFAULT=DIR:LABEL: copy DIR's figures of LABEL as today's default's, and DIR's pasted
#   figures, into REPORT_DIR before anything runs (issue 61: docs/dev/instruction_effect:effect-r2-gain,
#   the shipped default scored in the same harness on the same held-out items; `instemb-rag compare`
#   pairs the stance tasks by item id, so a changed item set fails there rather than pairing wrongly);
# - LINE_ONLY="A B": candidates scored without the facet groups (scripts/dev_report.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
REPORT="$1"; shift
INSTEMB=".venv/bin/instemb-rag"
SEEN="${SEEN:-runs/qtower/seen_records.jsonl}"
mkdir -p "$REPORT"
if [ -n "${SEED_DEFAULT:-}" ]; then
  from="${SEED_DEFAULT%%:*}"; seeded="${SEED_DEFAULT#*:}"
  for task in scifact stance-pooled nli-stance steering scifact-noinst; do
    [ -s "$REPORT/${task}_default.json" ] || cp "$from/${task}_$seeded.json" "$REPORT/${task}_default.json"
    [ -s "$REPORT/${task}_pasted.json" ] || cp "$from/${task}_pasted.json" "$REPORT/${task}_pasted.json"
  done
fi
untrained=()
for strength in ${UNTRAINED_STRENGTHS-1 1.5 2}; do
  folder="runs/effect-untrained-$strength"
  [ -e "$folder/instemb_parts.json" ] || "$INSTEMB" compose --arrangement effect --instruction-strength "$strength" --out "$folder"
  untrained+=("$folder")
done
label() { case "$1" in default) echo default ;; pasted:*) echo pasted ;; *) basename "$1" ;; esac; }
for model in "$@"; do
  out="$REPORT/traps_$(label "$model").json"
  [ -s "$out" ] || .venv/bin/python research/effect/traps.py "$out" default "$model"
done
bash scripts/dev_report.sh "$REPORT" "$@" "${untrained[@]}"
for model in default pasted:minilm "$@" "${untrained[@]}"; do
  out="$REPORT/scifact-noinst_$(label "$model").json"
  [ -s "$out" ] && continue
  echo "+ instemb-rag eval scifact --model $model --instruction ''" >&2
  "$INSTEMB" eval scifact --model "$model" --instruction '' --max-queries 100 --max-docs 300 \
    --exclude-seen "$SEEN" --no-progress -o "$out"
done
[ -s "$REPORT/own_files.json" ] || .venv/bin/python research/effect/own_files.py "$REPORT/own_files.json" \
  default pasted:minilm "$@" "${untrained[@]}"
