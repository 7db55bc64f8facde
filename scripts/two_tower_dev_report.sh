#!/usr/bin/env bash
# Issue 44's dev report, kept for its documented command; scripts/dev_report.sh does the work
# (and adds the negation pairs):
#   bash scripts/two_tower_dev_report.sh CANDIDATE OUTDIR [SEEN_RECORDS.jsonl] [DOCUMENT_TOWER]
set -euo pipefail
cd "$(dirname "$0")/.."
SEEN="${3:-runs/qtower/seen_records.jsonl}" TOWER="${4:-minilm}" exec bash scripts/dev_report.sh "$2" "$1"
