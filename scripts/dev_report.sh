#!/usr/bin/env bash
# The dev figures of issue 50's ship rule for one or more candidates, in one command:
#   bash scripts/dev_report.sh OUTDIR CANDIDATE [CANDIDATE ...]
# Each candidate beside the shipped default and MiniLM with the instruction pasted (pasted:minilm),
# on items no training record read (SEEN, default runs/qtower/seen_records.jsonl, from
# research/query_tower/select_queries.py; runs/facets/dev_factbook.jsonl from
# `instemb-rag build-facet-groups --out runs/facets`):
# - facet groups, first in group and first in pool: the 58 hand-written dev groups and the held-out
#   source (Factbook), the default and the pasted anchor scored in the same harness (paired gains);
# - SciFact nDCG@10 on 100 held-out claims, the pooled stance figure (per set, per label) and the
#   negation pairs (nli-stance: SICK and the negation NLI sets, entailed vs contradicting sentence);
# - `instemb-rag compare`: each candidate against the default and against the pasted anchor, paired.
# A candidate is any --model: a folder, or a two-space folder from `instemb-rag compose`.
# LINE_ONLY="A B ...": candidates scored on SciFact, stance and negation only (no facet groups):
# the points of a line such as the untrained mix at several weights.
# Figures already in OUTDIR are reused (the default's and the anchor's across candidates).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="$1"; shift
SEEN="${SEEN:-runs/qtower/seen_records.jsonl}"; TOWER="${TOWER:-minilm}"
INSTEMB=".venv/bin/instemb-rag"
[ -x "$INSTEMB" ] || INSTEMB="instemb-rag"
HELDOUT_SOURCE="runs/facets/dev_factbook.jsonl"
for needed in "$SEEN" "$HELDOUT_SOURCE"; do
  if [ ! -e "$needed" ]; then
    echo "error: $needed not found; see instemb_rag/training/recipes/two-spaces.yaml for the commands that make it" >&2
    exit 2
  fi
done
mkdir -p "$OUT"
run() { echo "+ instemb-rag $*" >&2; "$INSTEMB" "$@" --no-progress; }
label() { case "$1" in default) echo default ;; pasted:*) echo pasted ;; *) basename "$1" ;; esac; }
steering() {  # SciFact, pooled stance and negation pairs of one model, into OUT/steering_<label>.json
  local model="$1" name; name="$(label "$1")"
  for task in scifact stance-pooled nli-stance; do
    [ -s "$OUT/${task}_$name.json" ] && continue
    case "$task" in
      scifact) limits=(--max-queries 100 --max-docs 300) ;;
      stance-pooled) limits=(--max-queries 60) ;;
      nli-stance) limits=(--max-queries 200) ;;
    esac
    run eval "$task" --model "$model" "${limits[@]}" --exclude-seen "$SEEN" -o "$OUT/${task}_$name.json"
  done
  python3 - "$OUT" "$name" <<'PY'
import json, sys
out, name = sys.argv[1:]
results = [r for task in ("stance-pooled", "scifact", "nli-stance") for r in json.load(open(f"{out}/{task}_{name}.json"))["results"]]
json.dump({"format_version": 1, "results": results}, open(f"{out}/steering_{name}.json", "w"), indent=2)
PY
}
steering default
steering "pasted:$TOWER"
for candidate in "$@"; do
  name="$(label "$candidate")"
  for groups in dev heldout_source; do
    case " ${LINE_ONLY:-} " in *" $candidate "*) continue ;; esac
    [ -s "$OUT/facets_${groups}_$name.json" ] && continue
    extra=(); [ "$groups" = heldout_source ] && extra=(--groups "$HELDOUT_SOURCE")
    run eval facet-groups --model "$candidate" --against default --baseline bm25 --teacher "$TOWER" "${extra[@]}" \
      -o "$OUT/facets_${groups}_$name.json"
  done
  steering "$candidate"
  "$INSTEMB" compare "$OUT/steering_$name.json" "$OUT/steering_default.json" -o "$OUT/paired_${name}_vs_default.json"
  "$INSTEMB" compare "$OUT/steering_$name.json" "$OUT/steering_pasted.json" -o "$OUT/paired_${name}_vs_pasted.json"
done
