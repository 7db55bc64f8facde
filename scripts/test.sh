#!/usr/bin/env bash
# Second README command (and what CI runs): set up, then run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# Where this run is, in its first lines: the CPU kind and the int8 kernel fbgemm runs there (what
# the int8 tests' outcome depends on; issue 47), through the package's own probe.
.venv/bin/python -c "import os; from instemb_rag.encoder.cpu_flags import describe_cpu; print(f'CPU: {describe_cpu()}; {os.cpu_count()} logical CPUs')"
# The Ray tests (tests/index/test_index_ray.py: a two-node local cluster) need the `ray` extra,
# which the demo setup does not install. (The editable rebuild's information-only note is silenced.)
PYTHONWARNINGS="ignore::UserWarning" .venv/bin/python -m pip --disable-pip-version-check -q install -e ".[ray]"
# Lint and format are part of the suite (configuration in pyproject.toml's [tool.ruff]).
.venv/bin/ruff check .
.venv/bin/ruff format --check .
exec .venv/bin/python -m pytest "$@"
