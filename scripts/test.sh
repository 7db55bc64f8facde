#!/usr/bin/env bash
# Second README command (and what CI runs): set up, then run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# The Ray tests (tests/test_index_ray.py: a two-node local cluster) need the `ray` extra,
# which the demo setup does not install.
.venv/bin/python -m pip --disable-pip-version-check -q install -e ".[ray]"
exec .venv/bin/python -m pytest "$@"
