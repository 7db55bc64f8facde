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
# Environment: PYTHON (bare Python for .venv, default python3), INSTEMB_BENCH_MODEL (model for
# the GPU benchmark; default the shipped one), GPU_SH_OUT (dry run: where the table goes).
set -euo pipefail
cd "$(dirname "$0")/.."

DRY_RUN=0
QUICK=()
for arg in "$@"; do
  case "$arg" in
    --dry-run) DRY_RUN=1 ;;
    --quick) QUICK=(--quick) ;;
    *) echo "gpu.sh: unknown argument '$arg' (use --dry-run, --quick)" >&2; exit 2 ;;
  esac
done

step() { echo "== gpu.sh: $*"; }
# In a dry run the GPU-only steps are printed, not run.
run_or_show() {
  if [ "$DRY_RUN" = 1 ]; then echo "   (dry run, not run) $*"; else "$@"; fi
}

PY=.venv/bin/python
if [ "$DRY_RUN" = 0 ]; then
  if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
    echo "gpu.sh: no CUDA GPU here (nvidia-smi finds none). Use --dry-run to check the script on a CPU." >&2
    exit 3
  fi
  nvidia-smi -L
fi

step "install: .venv with torch (the PyPI Linux wheel of torch is the CUDA build), the package, faiss-gpu"
# setup.sh installs torch only when .venv has none; on a GPU box a CPU-only torch must go.
if [ "$DRY_RUN" = 0 ] && [ -x "$PY" ] && ! "$PY" -c "import torch, sys; sys.exit(0 if torch.version.cuda else 1)" 2>/dev/null; then
  "$PY" -m pip uninstall -y -q torch
fi
run_or_show bash scripts/setup.sh
# faiss GPU build: the project's extra, else the CUDA 12 wheel; the FAISS row says when neither works.
run_or_show bash -c "$PY -m pip install -q -e '.[gpu]' || $PY -m pip install -q faiss-gpu-cu12 || echo 'gpu.sh: no faiss GPU build installed; the FAISS row will say so'"
run_or_show "$PY" -c "import torch; assert torch.cuda.is_available(), 'torch sees no GPU'; print('torch', torch.__version__, 'CUDA', torch.version.cuda, torch.cuda.get_device_name(0))"

step "tests that need CUDA (they skip on a CPU machine; here a 'no CUDA GPU' skip is a failure)"
run_or_show bash -c "set -o pipefail; $PY -m pytest -q -rs tests/test_cuda_path.py tests/test_quantize.py tests/index/test_faiss_gpu.py | tee /tmp/gpu_sh_tests.txt && ! grep -q 'SKIPPED.*no CUDA GPU' /tmp/gpu_sh_tests.txt"

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
