#!/usr/bin/env bash
# One round of issue 50's measurements, after `instemb-rag train --config CONFIG` finished:
#   bash research/two_spaces/round.sh RUN_DIR REPORT_DIR
# Composes the untrained mix at w = 0.5, 0.7, 0.85 (the line: the shipped LLM beside
# all-MiniLM-L6-v2, no query side), then scores the run's final folder and the three mixes with
# scripts/dev_report.sh (the default's and MiniLM-pasted's figures are computed once and reused).
set -euo pipefail
cd "$(dirname "$0")/../.."
RUN="$1"; REPORT="$2"
INSTEMB=".venv/bin/instemb-rag"
for weight in 0.5 0.7 0.85; do
  [ -e "runs/mix-$weight/instemb_parts.json" ] || "$INSTEMB" compose --llm-weight "$weight" --out "runs/mix-$weight"
done
bash scripts/dev_report.sh "$REPORT" "$RUN/final" runs/mix-0.5 runs/mix-0.7 runs/mix-0.85
