#!/usr/bin/env bash
# Issue 39's dev figures of one candidate against the shipped default, in one command:
#   bash scripts/facets_dev_report.sh CANDIDATE OUTDIR [SEEN_RECORDS.jsonl] [TUNED_TEACHER]
# - facet groups, first in group, on the 58 hand-written dev groups (eval_sets/) and on the held-out
#   source (runs/facets/dev_factbook.jsonl, `instemb-rag build-facet-groups --out runs/facets`),
#   each with the default, BM25, MiniLM, mpnet and the fine-tuned teacher (instruction pasted)
#   scored in the same harness; the paired gains are in the results' "comparisons";
# - the pooled stance figure (SciFact stance, Climate-FEVER, held-out PERSPECTRUM, NLI; 60 claims a set)
#   and SciFact nDCG@10 on held-out claims, for both encoders, then `instemb-rag compare`.
# SEEN_RECORDS: every text any compared model trained on (queries found in it are left out, the
# same items for both); default runs/seen/seen_candidates.jsonl. ~40 min on 2 CPU cores.
set -euo pipefail
cd "$(dirname "$0")/.."
CANDIDATE="$1"; OUT="$2"; SEEN="${3:-runs/seen/seen_candidates.jsonl}"; TUNED="${4:-runs/teachers/minilm-facets}"
INSTEMB=".venv/bin/instemb-rag"
[ -x "$INSTEMB" ] || INSTEMB="instemb-rag"
HELDOUT_SOURCE="runs/facets/dev_factbook.jsonl"
for needed in "$SEEN" "$HELDOUT_SOURCE" "$TUNED"; do
  if [ ! -e "$needed" ]; then
    echo "error: $needed not found; see instemb_rag/training/recipes/facets-general.yaml for the commands that make it" >&2
    exit 2
  fi
done
mkdir -p "$OUT"
run() { echo "+ instemb-rag $*" >&2; "$INSTEMB" "$@" --no-progress; }
TEACHERS=(--baseline bm25 --teacher minilm --teacher mpnet --teacher "$TUNED")
run eval facet-groups --model "$CANDIDATE" --against default "${TEACHERS[@]}" -o "$OUT/facets_dev.json"
run eval facet-groups --model "$CANDIDATE" --against default "${TEACHERS[@]}" --groups "$HELDOUT_SOURCE" \
  -o "$OUT/facets_heldout_source.json"
for who in candidate default; do
  model="$CANDIDATE"; [ "$who" = default ] && model=default
  run eval stance-pooled --model "$model" --max-queries 60 --exclude-seen "$SEEN" -o "$OUT/stance_$who.json"
  run eval scifact --model "$model" --max-queries 100 --max-docs 300 --exclude-seen "$SEEN" -o "$OUT/scifact_$who.json"
done
python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
for who in ("candidate", "default"):
    results = [r for name in ("stance", "scifact") for r in json.load(open(f"{out}/{name}_{who}.json"))["results"]]
    json.dump({"format_version": 1, "results": results}, open(f"{out}/steering_{who}.json", "w"), indent=2)
PY
"$INSTEMB" compare "$OUT/steering_candidate.json" "$OUT/steering_default.json" -o "$OUT/paired_vs_default.json"
