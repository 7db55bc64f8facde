#!/usr/bin/env bash
# Dev figures of one checkpoint on held-out groups, with bootstrap 95 % intervals:
#   bash scripts/dev_figures.sh MODEL OUTPUT.json [TRAIN_RECORDS.jsonl]
# MODEL: a checkpoint folder (instemb_rag/default_checkpoint, runs/<run>/final). Queries whose text
# occurs in TRAIN_RECORDS (default: the instruction-steering run's records) are left out, so two
# checkpoints scored with the same file are scored on the same items. ~25 min on 2 CPU cores.
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL="$1"; OUTPUT="$2"; SEEN="${3:-runs/instruction-steering/data/train.jsonl}"
INSTEMB=".venv/bin/instemb-rag"
[ -x "$INSTEMB" ] || INSTEMB="instemb-rag"
if [ ! -f "$SEEN" ]; then
  echo "error: $SEEN not found; build it with: instemb-rag train --config instemb_rag/training/recipes/instruction-steering.yaml" >&2
  exit 2
fi
tmp="$(mktemp -d)"
"$INSTEMB" eval medquad-facets climate-fever-stance --model "$MODEL" --max-queries 80 --no-progress -o "$tmp/steering.json"
"$INSTEMB" eval nli-stance --model "$MODEL" --max-queries 159 --no-progress -o "$tmp/nli.json"
"$INSTEMB" eval scifact-stance scifact --model "$MODEL" --max-queries 100 --max-docs 300 \
  --exclude-seen "$SEEN" --no-progress -o "$tmp/scifact.json"
"$INSTEMB" eval vaswani --model "$MODEL" --max-queries 30 --max-docs 500 --no-progress -o "$tmp/vaswani.json"
"$INSTEMB" eval stsb --model "$MODEL" --max-queries 500 --no-progress -o "$tmp/stsb.json"
"$INSTEMB" eval facet-groups --model "$MODEL" --no-progress -o "$tmp/facets.json"  # eval_sets/, general subjects
python3 - "$OUTPUT" "$tmp"/steering.json "$tmp"/nli.json "$tmp"/scifact.json "$tmp"/vaswani.json "$tmp"/stsb.json \
  "$tmp"/facets.json <<'PY'
import json, sys
results = [r for path in sys.argv[2:] for r in json.load(open(path))["results"]]
json.dump({"format_version": 1, "results": results}, open(sys.argv[1], "w"), indent=2)
print(f"wrote {sys.argv[1]} ({len(results)} results)")
PY
rm -rf "$tmp"
