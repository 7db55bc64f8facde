#!/usr/bin/env bash
# One round of issue 67's dev figures: the shipped default with and without a reader, on items no
# training record read (the default's own training records and the reader's), every figure paired.
#   bash research/reader/round.sh REPORT_DIR READER_FOLDER
# READER_FOLDER: a trained reader's final/ (config, weights, fusion.json) or a model folder with a
# rerank route. Writes REPORT_DIR/<task>_{default,reader}.json, facets_{dev,heldout_source}.json
# (reader first, paired with the default in one harness), traps.json, own_files.json; then
#   python research/reader/ship_rule.py REPORT_DIR
# applies the rule. Figures already in REPORT_DIR are reused (delete a file to score it again).
set -euo pipefail
cd "$(dirname "$0")/../.."
REPORT="$1"; READER="$2"
INSTEMB=".venv/bin/instemb-rag"; PY=".venv/bin/python"
QTOWER_SEEN="runs/qtower/seen_records.jsonl"        # the default's training texts (see dev_report.sh)
READER_SEEN="${READER_SEEN:-runs/reader/records.seen.jsonl}"  # build-reader-data writes <out>.seen.jsonl
FACTBOOK="runs/facets/dev_factbook.jsonl"
for needed in "$QTOWER_SEEN" "$READER_SEEN" "$FACTBOOK"; do
  [ -e "$needed" ] || { echo "error: $needed not found (instemb_rag/training/recipes/two-spaces.yaml and research/reader/round1.yaml say how to make it)" >&2; exit 2; }
done
mkdir -p "$REPORT"
SEEN="$REPORT/seen_all.jsonl"
[ -s "$SEEN" ] || cat "$QTOWER_SEEN" "$READER_SEEN" > "$SEEN"
run() { echo "+ instemb-rag $*" >&2; "$INSTEMB" "$@" --no-progress; }
for side in default reader; do
  extra=(); [ "$side" = reader ] && extra=(--reader "$READER")
  for task in scifact stance-pooled nli-stance; do
    out="$REPORT/${task}_$side.json"; [ -s "$out" ] && continue
    case "$task" in
      scifact) limits=(--max-queries 100 --max-docs 300) ;;
      stance-pooled) limits=(--max-queries 60) ;;
      nli-stance) limits=(--max-queries 200) ;;
    esac
    run eval "$task" --model default "${extra[@]}" "${limits[@]}" --exclude-seen "$SEEN" -o "$out"
  done
  out="$REPORT/scifact-noinst_$side.json"
  [ -s "$out" ] || run eval scifact --model default "${extra[@]}" --instruction '' --max-queries 100 --max-docs 300 --exclude-seen "$SEEN" -o "$out"
done
[ -s "$REPORT/facets_dev.json" ] || run eval facet-groups --model default --reader "$READER" --baseline bm25 -o "$REPORT/facets_dev.json"
[ -s "$REPORT/facets_heldout_source.json" ] || run eval facet-groups --model default --reader "$READER" --groups "$FACTBOOK" -o "$REPORT/facets_heldout_source.json"
[ -s "$REPORT/traps.json" ] || "$PY" research/effect/traps.py "$REPORT/traps.json" default "default+reader:$READER"
[ -s "$REPORT/own_files.json" ] || "$PY" research/effect/own_files.py "$REPORT/own_files.json" default "default+reader:$READER"
"$PY" research/reader/ship_rule.py "$REPORT"
