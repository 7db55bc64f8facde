#!/usr/bin/env bash
# Second README command (and what CI runs): set up with the test tools, then run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
# --dev: beyond what the command line needs (scripts/demo.sh), the dev, train, ray and mcp extras and
# the LlamaIndex integration with its vector-store extras (the Ray tests start a two-node local cluster).
bash scripts/setup.sh --dev
# Where this run is, in its first lines: the CPU kind and the int8 kernel fbgemm runs there (what
# the int8 tests' outcome depends on; issue 47), through the package's own probe.
.venv/bin/python -c "import os; from instemb_rag.encoder.cpu_flags import describe_cpu; print(f'CPU: {describe_cpu()}; {os.cpu_count()} logical CPUs')"
# Lint and format are part of the suite (configuration in pyproject.toml's [tool.ruff]).
.venv/bin/ruff check .
.venv/bin/ruff format --check .
exec .venv/bin/python -m pytest "$@"
