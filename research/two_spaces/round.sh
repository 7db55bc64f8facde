#!/usr/bin/env bash
# One round of issue 50's measurements, after `instemb-rag train --config CONFIG` finished and its
# final folder was copied under research/checkpoints/ (the folder's name labels its figures):
#   bash research/two_spaces/round.sh REPORT_DIR CANDIDATE [CANDIDATE ...]
# Composes the untrained mix at w = 0.5, 0.7, 0.85 (the line: the shipped LLM beside
# all-MiniLM-L6-v2, no query side), then scores the candidates and the three mixes with
# scripts/dev_report.sh (the default's and MiniLM-pasted's figures are computed once and reused).
set -euo pipefail
cd "$(dirname "$0")/../.."
REPORT="$1"; shift
INSTEMB=".venv/bin/instemb-rag"
for weight in 0.5 0.7 0.85; do
  [ -e "runs/mix-$weight/instemb_parts.json" ] || "$INSTEMB" compose --llm-weight "$weight" --out "runs/mix-$weight"
done
# The line's other points on the steering figures only (SciFact, stance, negation): what moves with w.
LINE_ONLY="runs/mix-0.7 runs/mix-0.85" bash scripts/dev_report.sh "$REPORT" "$@" runs/mix-0.5 runs/mix-0.7 runs/mix-0.85
