#!/usr/bin/env bash
# Second README command (and what CI runs): set up, then run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# The Ray tests (tests/index/test_index_ray.py: a two-node local cluster) need the `ray` extra,
# which the demo setup does not install. (The editable rebuild's information-only note is silenced.)
PYTHONWARNINGS="ignore::UserWarning" .venv/bin/python -m pip --disable-pip-version-check -q install -e ".[ray]"
# Lint and format are part of the suite (configuration in pyproject.toml's [tool.ruff]).
.venv/bin/ruff check .
.venv/bin/ruff format --check .
exec .venv/bin/python -m pytest "$@"
