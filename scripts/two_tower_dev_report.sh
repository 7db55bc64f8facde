#!/usr/bin/env bash
# Issue 44's dev figures of one candidate (a two-tower checkpoint, or any encoder) in one command:
#   bash scripts/two_tower_dev_report.sh CANDIDATE OUTDIR [SEEN_RECORDS.jsonl] [DOCUMENT_TOWER]
# Beside the shipped default and the document tower alone with the instruction pasted
# (--model pasted:DOCUMENT_TOWER, default minilm), on items no training record read:
# - facet groups, first in group and first in pool, on the 58 hand-written dev groups and on the
#   held-out source (runs/facets/dev_factbook.jsonl from `instemb-rag build-facet-groups --out runs/facets`),
#   with BM25 and the pasted anchor scored in the same harness (paired gains in "comparisons");
# - the pooled stance figure (SciFact stance, Climate-FEVER, held-out PERSPECTRUM, negation NLI;
#   60 items a set) with its per-set and per-label splits, and SciFact nDCG@10 on held-out claims;
# - `instemb-rag compare`: candidate against the default and against the pasted anchor, paired.
# SEEN_RECORDS: every text the candidate trained on (runs/qtower/seen_records.jsonl, from
# research/query_tower/select_queries.py). About 30 min on 2 CPU cores.
set -euo pipefail
cd "$(dirname "$0")/.."
CANDIDATE="$1"; OUT="$2"; SEEN="${3:-runs/qtower/seen_records.jsonl}"; TOWER="${4:-minilm}"
INSTEMB=".venv/bin/instemb-rag"
[ -x "$INSTEMB" ] || INSTEMB="instemb-rag"
HELDOUT_SOURCE="runs/facets/dev_factbook.jsonl"
for needed in "$SEEN" "$HELDOUT_SOURCE"; do
  if [ ! -e "$needed" ]; then
    echo "error: $needed not found; see instemb_rag/training/recipes/query-tower.yaml for the commands that make it" >&2
    exit 2
  fi
done
mkdir -p "$OUT"
run() { echo "+ instemb-rag $*" >&2; "$INSTEMB" "$@" --no-progress; }
run eval facet-groups --model "$CANDIDATE" --against default --baseline bm25 --teacher "$TOWER" -o "$OUT/facets_dev.json"
run eval facet-groups --model "$CANDIDATE" --against default --baseline bm25 --teacher "$TOWER" \
  --groups "$HELDOUT_SOURCE" -o "$OUT/facets_heldout_source.json"
for who in candidate default pasted; do
  case "$who" in candidate) model="$CANDIDATE" ;; default) model=default ;; pasted) model="pasted:$TOWER" ;; esac
  for task in scifact stance-pooled; do
    [ -s "$OUT/${task}_$who.json" ] && continue  # the default's and the anchor's figures are reused across candidates
    if [ "$task" = scifact ]; then limits=(--max-queries 100 --max-docs 300); else limits=(--max-queries 60); fi
    run eval "$task" --model "$model" "${limits[@]}" --exclude-seen "$SEEN" -o "$OUT/${task}_$who.json"
  done
done
python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
for who in ("candidate", "default", "pasted"):
    results = [r for name in ("stance-pooled", "scifact") for r in json.load(open(f"{out}/{name}_{who}.json"))["results"]]
    json.dump({"format_version": 1, "results": results}, open(f"{out}/steering_{who}.json", "w"), indent=2)
PY
"$INSTEMB" compare "$OUT/steering_candidate.json" "$OUT/steering_default.json" -o "$OUT/paired_vs_default.json"
"$INSTEMB" compare "$OUT/steering_candidate.json" "$OUT/steering_pasted.json" -o "$OUT/paired_vs_pasted.json"
