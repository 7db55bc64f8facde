#!/usr/bin/env bash
# First README command: set up what the command line needs (no test or training tools), then index
# the bundled sample docs and query them under two instructions with the embedded default model.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/instemb-rag demo "$@"
