"""Training throughput (examples/s, input tokens/s) with and without the teacher cache.

With the cache, teacher targets are computed once before training (reported separately
as a one-time cost); without it, the frozen initial model runs on ``[x; y[:L]]`` at every
step, which is what a trainer holding a teacher copy would do.

    python benchmarks/bench_training.py --steps 3                 # default model, CPU or CUDA
    python benchmarks/bench_training.py --steps 3 --device cuda --batch-size 8

Needs ../shared/data (the records are built from it); writes runs/bench_training/results.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from instemb_rag.training.args import load_config
from instemb_rag.training.builders import build_data_folder
from instemb_rag.training.trainer import train

ROOT = Path(__file__).resolve().parents[1]
RECIPE = ROOT / "instemb_rag" / "training" / "recipes" / "default.yaml"


def measure(mode: str, args, train_file: Path, out: Path) -> dict:
    output_dir = out / mode
    overrides = {
        "data.train_file": str(train_file), "training.output_dir": str(output_dir),
        "training.max_steps": args.steps, "training.batch_size": args.batch_size,
        "training.save_steps": 10**6, "training.device": args.device, "training.show_progress": False,
        "training.teacher_cache": mode == "cached", "training.teacher_cache_dir": str(output_dir / "tc"),
    }
    if args.model:
        overrides["model.model_name_or_path"] = args.model
    if args.full_layers:
        overrides["model.lora_rank"] = 0
    started = time.perf_counter()
    train(load_config(RECIPE, overrides))
    wall = time.perf_counter() - started
    rows = [json.loads(line) for line in (output_dir / "metrics.jsonl").read_text().splitlines()]
    info = json.loads((output_dir / "run_info.json").read_text())
    # Step times from the cumulative clock; the first step also pays warm-up, so skip it when we can.
    ends = [row["elapsed_s"] for row in rows]
    durations = [b - a for a, b in zip([0.0] + ends[:-1], ends)]
    timed = list(zip(durations, rows))[1:] or list(zip(durations, rows))
    step_s = statistics.mean(d for d, _ in timed)
    tokens = statistics.mean(r["input_tokens"] for _, r in timed)
    return {
        "mode": mode, "device": info["device"], "steps": args.steps, "batch_size": args.batch_size,
        "seconds_per_step": round(step_s, 2),
        "examples_per_s": round(args.batch_size / step_s, 3),
        "input_tokens_per_s": round(tokens / step_s, 1),
        "teacher_cache_s": info.get("teacher_cache", {}).get("seconds"),
        "wall_s": round(wall, 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--model", default=None, help="backbone folder; default: the default backbone")
    parser.add_argument("--full-layers", action="store_true", help="train the top layers fully instead of LoRA")
    parser.add_argument("--data-root", default=str(ROOT.parent / "shared" / "data"))
    parser.add_argument("--out", default=str(ROOT / "runs" / "bench_training"))
    args = parser.parse_args()
    if not Path(args.data_root).is_dir():
        print(f"skipped: {args.data_root} is absent (development data lives in ../shared/data)")
        return 0
    out = Path(args.out)
    build_data_folder(out / "data", args.data_root, max_per_set=50, seed=0)
    results = [measure(mode, args, out / "data" / "train.jsonl", out) for mode in ("cached", "uncached")]
    (out / "results.json").write_text(json.dumps(results, indent=2))
    print("| teacher | device | s/step | examples/s | input tokens/s | one-time teacher cache (s) |")
    print("|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['mode']} | {r['device']} | {r['seconds_per_step']} | {r['examples_per_s']} | "
              f"{r['input_tokens_per_s']} | {r['teacher_cache_s'] if r['teacher_cache_s'] is not None else '-'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
