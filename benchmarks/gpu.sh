#!/usr/bin/env bash
# One call on a machine with a CUDA GPU: install, run the tests that need CUDA, run every
# benchmark on the GPU and write the GPU table into benchmarks/README.md (section gpu-results;
# raw figures in benchmarks/results_cuda.json). The CPU table is left alone.
#
#   bash benchmarks/gpu.sh                 # full repeats (~15-30 min on an H100)
#   bash benchmarks/gpu.sh --quick         # fewer repeats
#   bash benchmarks/gpu.sh --dry-run       # no GPU needed: print the GPU steps, then run the
#                                          # GPU benchmark on the CPU with tiny sizes and print
#                                          # its table (what the test suite checks)
#
# A GPU machine without a package index (README "GPU machine without internet"): the kit from
# `python scripts/gpu_kit.py build` replaces setup.sh, and the figures go to a results folder
# that `python benchmarks/merge_gpu_results.py DIR` later writes into benchmarks/README.md:
#
#   bash benchmarks/gpu.sh --offline gpu-kit [--results DIR] [--quick] [--only gpu,encoder] [--no-tests]
#   bash benchmarks/gpu.sh --offline gpu-kit --dry-run    # check, join, install, embed one query (any device)
#
# Issue 57's goals, one command (minutes on an H100 or H200): the CUDA path's tests, then
# bench_gpu.py --shape default, llama-1b and llama-8b (random weights built on the GPU, eager vs the
# CUDA path in one run, the profile split), the table on stdout and in the results folder
# (default gpu-kit/goals-results):
#
#   bash benchmarks/gpu.sh --goals [--quick] [--results DIR]             # .venv through setup.sh
#   bash benchmarks/gpu.sh --goals --kit gpu-kit/goals [--results DIR]   # no package index: the image's
#       # python3 (PYTHON) with its torch and transformers, plus the 6 MiB that
#       # `python benchmarks/bench_gpu_shapes.py kit gpu-kit/goals` writes where PyPI is reachable
#   bash benchmarks/gpu.sh --goals --dry-run                             # the flow on the CPU, tiny shape
#
# Environment: PYTHON (bare Python for .venv, default python3; with --offline the image's Python
# that holds torch), INSTEMB_BENCH_MODEL (model for the GPU benchmark; default the shipped one),
# GPU_SH_OUT (dry run: where the table goes).
set -euo pipefail
CALLER_DIR="$PWD"  # --offline KIT, --results DIR and PYTHON are read from where gpu.sh was called
cd "$(dirname "$0")/.."

DRY_RUN=0
QUICK=()
OFFLINE=""
RESULTS=""
ONLY=()
TESTS=1
GOALS=0
KIT=""
USAGE="use --dry-run, --quick, --offline KIT, --results DIR, --only NAME[,NAME], --no-tests, --goals, --kit DIR"
value_of() {  # the value after an option, or a usage error naming the option
  if [ -z "${2:-}" ] || [ "${2#--}" != "$2" ]; then echo "gpu.sh: $1 needs a value ($USAGE)" >&2; exit 2; fi
  printf '%s' "$2"
}
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) DRY_RUN=1 ;;
    --quick) QUICK=(--quick) ;;
    --offline) OFFLINE="$(value_of "$1" "${2:-}")" || exit 2; shift ;;
    --results) RESULTS="$(value_of "$1" "${2:-}")" || exit 2; shift ;;
    --only) ONLY_VALUE="$(value_of "$1" "${2:-}")" || exit 2; IFS=, read -r -a ONLY <<< "$ONLY_VALUE"; ONLY=(--only "${ONLY[@]}"); shift ;;
    --no-tests) TESTS=0 ;;
    --goals) GOALS=1 ;;
    --kit) KIT="$(value_of "$1" "${2:-}")" || exit 2; shift ;;
    *) echo "gpu.sh: unknown argument '$1' ($USAGE)" >&2; exit 2 ;;
  esac
  shift
done
if [ -n "$KIT" ] && [ "$GOALS" = 0 ]; then
  echo "gpu.sh: --kit goes with --goals (the offline kit of every benchmark is --offline KIT)" >&2
  exit 2
fi
if [ "$GOALS" = 1 ] && { [ -n "$OFFLINE" ] || [ "${#ONLY[@]}" -gt 0 ] || [ "$TESTS" = 0 ]; }; then
  echo "gpu.sh: --goals takes --quick, --kit, --results and --dry-run only" >&2
  exit 2
fi
if [ -z "$OFFLINE" ] && [ "$GOALS" = 0 ] && { [ -n "$RESULTS" ] || [ "${#ONLY[@]}" -gt 0 ] || [ "$TESTS" = 0 ]; }; then
  echo "gpu.sh: --results, --only and --no-tests go with --offline KIT" >&2
  exit 2
fi

step() { echo "== gpu.sh: $*"; }
# In a dry run the GPU-only steps are printed, not run.
run_or_show() {
  if [ "$DRY_RUN" = 1 ]; then echo "   (dry run, not run) $*"; else "$@"; fi
}

require_gpu() {
  if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
    echo "gpu.sh: no CUDA GPU here (nvidia-smi finds none). Use --dry-run to check the script on a CPU." >&2
    exit 3
  fi
  nvidia-smi -L
}
CUDA_TESTS=(tests/test_cuda_path.py tests/encoder/fast/test_cuda_graphs.py tests/test_quantize.py tests/index/test_faiss_gpu.py)

from_caller() { case "$1" in /*) printf '%s' "$1" ;; *) printf '%s' "$CALLER_DIR/$1" ;; esac; }

# --offline KIT: no package index. The kit's wheels go on top of the image's torch (never
# resolved, never replaced); results go to a folder, merged into the README elsewhere.
offline() {
  local kit py="${PYTHON:-python3}" tests_rc=0 results
  kit="$(from_caller "$OFFLINE")"
  if [ ! -f "$kit/manifest.json" ]; then
    echo "gpu.sh: $kit/manifest.json not found: build the kit with 'python scripts/gpu_kit.py build' and send every transfer its plan.json lists" >&2
    exit 2
  fi
  case "$py" in */*) py="$(from_caller "$py")" ;; esac  # a path, not a name on PATH
  results="${RESULTS:+$(from_caller "$RESULTS")}"
  results="${results:-$kit/results}"
  mkdir -p "$results"
  [ "$DRY_RUN" = 1 ] || require_gpu
  step "install the kit: check sha256, join the pieces, pip install --no-index --no-deps --target (the image's torch stays)"
  "$py" scripts/gpu_kit.py install "$kit"
  cp "$kit/unpacked/installed.json" "$results/install.json"  # kit id, source commit, faiss, warnings
  # shellcheck disable=SC1091  # written by the line above
  source "$kit/unpacked/env.sh"
  if [ "$DRY_RUN" = 1 ]; then
    step "dry run: embed one query with the installed package, on this machine's device"
    # From the unpack folder, so that the installed package is imported, not this checkout's.
    (cd "$kit/unpacked" && "$py" "$OLDPWD/scripts/gpu_kit.py" smoke --out "$results/smoke.json")
    run_or_show "$py" -m pytest -q -rs "${CUDA_TESTS[@]}"
    run_or_show "$py" benchmarks/run.py --device cuda --no-readme --results-json "$results/results_cuda.json" "${QUICK[@]}" "${ONLY[@]}"
    echo "gpu.sh: dry run done; $results/smoke.json"
    exit 0
  fi
  "$py" scripts/gpu_kit.py environment --out "$results/environment.json"
  if ! "$py" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
    echo "gpu.sh: torch in $py sees no CUDA GPU (a CPU-only torch?); the kit installs on top of the image's CUDA torch" >&2
    exit 3
  fi
  if [ "$TESTS" = 1 ]; then
    step "tests that need CUDA (a 'no CUDA GPU' skip counts as a failure) -> $results/cuda_tests.txt"
    "$py" -m pytest -q -rs "${CUDA_TESTS[@]}" 2>&1 | tee "$results/cuda_tests.txt" || tests_rc=$?
    if grep -q 'SKIPPED.*no CUDA GPU' "$results/cuda_tests.txt"; then tests_rc=1; fi
  fi
  step "benchmarks on the GPU -> $results/results_cuda.json"
  "$py" benchmarks/run.py --device cuda --no-readme --results-json "$results/results_cuda.json" "${QUICK[@]}" "${ONLY[@]}"
  echo "gpu.sh: done; bring $results back and run: python benchmarks/merge_gpu_results.py $results"
  [ "$tests_rc" = 0 ] || echo "gpu.sh: the CUDA tests failed (exit $tests_rc); see $results/cuda_tests.txt" >&2
  exit "$tests_rc"
}
if [ -n "$OFFLINE" ]; then
  offline
fi

# --goals: issue 57's goals (benchmarks/bench_gpu_shapes.py), with .venv or a small kit on the image's Python.
goals() {
  local py results kit rc=0 shape inductor
  results="${RESULTS:+$(from_caller "$RESULTS")}"
  results="${results:-${GPU_SH_OUT:-gpu-kit/goals-results}}"
  mkdir -p "$results"
  if [ -n "$KIT" ]; then
    kit="$(from_caller "$KIT")"
    py="${PYTHON:-python3}"
    case "$py" in */*) py="$(from_caller "$py")" ;; esac
    if [ ! -f "$kit/tokenizer/tokenizer.json" ]; then
      echo "gpu.sh: $kit/tokenizer/tokenizer.json not found: run 'python benchmarks/bench_gpu_shapes.py kit $KIT' where PyPI is reachable and bring that folder" >&2
      exit 2
    fi
    if ls "$kit"/wheels/*.whl >/dev/null 2>&1; then
      step "install the kit's wheels for $py (no index, no dependencies: the image's torch and transformers stay)"
      "$py" -m pip install -q --no-index --no-deps --upgrade --target "$kit/site" "$kit"/wheels/*.whl
    fi
    export PYTHONPATH="$kit/site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
    export INSTEMB_BENCH_TOKENIZER="$kit/tokenizer"
  else
    py=.venv/bin/python
    step "install: .venv with a CUDA torch (scripts/setup.sh)"
    if [ "$DRY_RUN" = 0 ] && [ -x "$py" ] && ! "$py" -c "import torch, sys; sys.exit(0 if torch.version.cuda else 1)" 2>/dev/null; then
      "$py" -m pip uninstall -y -q torch
    fi
    run_or_show bash scripts/setup.sh --dev  # pytest: the CUDA tests below
  fi
  if [ "$DRY_RUN" = 1 ]; then
    step "dry run: bench_gpu.py --shape default --smoke on the CPU (the figures mean nothing; the flow is what is checked)"
    "$py" benchmarks/bench_gpu.py --shape default --smoke --json-out "$results/goals_default.json" >"$results/goals_default.log" 2>&1
    "$py" benchmarks/bench_gpu_shapes.py table "$results/goals_default.json" | tee "$results/goals_table.md"
    echo "gpu.sh: dry run done; table in $results/goals_table.md"
    exit 0
  fi
  require_gpu
  step "the CUDA path's tests (a 'no CUDA GPU' skip counts as a failure) -> $results/cuda_graph_tests.txt"
  "$py" -m pytest -q -rs -p no:cacheprovider tests/encoder/fast/test_cuda_graphs.py 2>&1 | tee "$results/cuda_graph_tests.txt" || rc=1
  if grep -q 'SKIPPED.*no CUDA GPU' "$results/cuda_graph_tests.txt"; then rc=1; fi
  for shape in default llama-1b llama-8b; do
    # --inductor: the CUDA path over torch.compile'd blocks as a third column (not for 8B: its compile time)
    inductor=(--inductor)
    [ "$shape" != llama-8b ] || inductor=()
    step "bench_gpu.py --shape $shape ${inductor[*]} (random weights built on the GPU) -> $results/goals_$shape.json"
    if ! "$py" benchmarks/bench_gpu.py --device cuda --shape "$shape" "${inductor[@]}" "${QUICK[@]}" --json-out "$results/goals_$shape.json" >"$results/goals_$shape.log" 2>&1; then
      rc=1
      echo "gpu.sh: --shape $shape failed; the end of $results/goals_$shape.log:" >&2
      tail -20 "$results/goals_$shape.log" >&2
    fi
  done
  if ls "$results"/goals_*.json >/dev/null 2>&1; then
    "$py" benchmarks/bench_gpu_shapes.py table "$results"/goals_*.json | tee "$results/goals_table.md"
  fi
  echo "gpu.sh: goals done (exit $rc); figures in $results"
  exit "$rc"
}
if [ "$GOALS" = 1 ]; then
  goals
fi

PY=.venv/bin/python
[ "$DRY_RUN" = 1 ] || require_gpu

step "install: .venv with torch (the PyPI Linux wheel of torch is the CUDA build), the package, faiss-gpu"
# setup.sh installs torch only when .venv has none; on a GPU box a CPU-only torch must go.
if [ "$DRY_RUN" = 0 ] && [ -x "$PY" ] && ! "$PY" -c "import torch, sys; sys.exit(0 if torch.version.cuda else 1)" 2>/dev/null; then
  "$PY" -m pip uninstall -y -q torch
fi
run_or_show bash scripts/setup.sh --dev  # pytest: the CUDA tests below
# faiss GPU build: the project's extra, else the CUDA 12 wheel; the FAISS row says when neither works.
run_or_show bash -c "$PY -m pip install -q -e '.[gpu]' || $PY -m pip install -q faiss-gpu-cu12 || echo 'gpu.sh: no faiss GPU build installed; the FAISS row will say so'"
run_or_show "$PY" -c "import torch; assert torch.cuda.is_available(), 'torch sees no GPU'; print('torch', torch.__version__, 'CUDA', torch.version.cuda, torch.cuda.get_device_name(0))"

step "tests that need CUDA (they skip on a CPU machine; here a 'no CUDA GPU' skip is a failure)"
run_or_show bash -c "set -o pipefail; $PY -m pytest -q -rs ${CUDA_TESTS[*]} | tee /tmp/gpu_sh_tests.txt && ! grep -q 'SKIPPED.*no CUDA GPU' /tmp/gpu_sh_tests.txt"

step "benchmarks on the GPU: every script of run.py plus bench_gpu.py, table -> benchmarks/README.md (gpu-results)"
if [ "$DRY_RUN" = 0 ]; then
  "$PY" benchmarks/run.py --device cuda "${QUICK[@]}"
  exit 0
fi
run_or_show "$PY" benchmarks/run.py --device cuda "${QUICK[@]}"

step "dry run: bench_gpu.py on the CPU with tiny sizes (figures mean nothing; the flow is what is checked)"
OUT="${GPU_SH_OUT:-$(mktemp -d)}"
mkdir -p "$OUT"
INSTEMB_GPU_DRY_RUN=1 "$PY" benchmarks/run.py --only gpu --device cpu --quick --no-readme | tee "$OUT/gpu_table.md"
grep -q "DRY RUN" "$OUT/gpu_table.md"
echo "gpu.sh: dry run done; table in $OUT/gpu_table.md"
