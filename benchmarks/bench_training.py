"""Training throughput (examples/s, input tokens/s) with and without the teacher cache.

With the cache, teacher targets are computed once before training (reported separately
as a one-time cost); without it, the frozen initial model runs on ``[x; y[:L]]`` at every
step, which is what a trainer holding a teacher copy would do.

    python benchmarks/bench_training.py [--quick] [--json-out out.json] [--device cpu|cuda]
    python benchmarks/bench_training.py --steps 5 --device cuda --batch-size 8

Needs ../shared/data (the records are built from it); run folders go to runs/bench_training.
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

from bench_common import PROJECT_ROOT, SHARED_DATA, apply_threads, base_parser, emit, machine_info

RECIPE = PROJECT_ROOT / "instemb_rag" / "training" / "recipes" / "default.yaml"


def measure(mode: str, args, train_file: Path, out: Path) -> dict:
    from instemb_rag.training.args import load_config
    from instemb_rag.training.trainer import train

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


def main(argv: list[str] | None = None) -> dict:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=None, help="optimizer steps per mode (default 4, quick 2)")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--model", default=None, help="backbone folder; default: the default backbone")
    parser.add_argument("--full-layers", action="store_true", help="train the top layers fully instead of LoRA")
    parser.add_argument("--out", default=str(PROJECT_ROOT / "runs" / "bench_training"))
    args = parser.parse_args(argv)
    args.steps = args.steps or (2 if args.quick else 4)
    threads = apply_threads(args.threads)
    if not SHARED_DATA.is_dir():
        return emit({"benchmark": "training", "skipped": f"{SHARED_DATA} is absent"}, args.json_out)
    from instemb_rag.training.builders import build_data_folder

    out = Path(args.out)
    build_data_folder(out / "data", SHARED_DATA, max_per_set=50, seed=0)
    results = {mode: measure(mode, args, out / "data" / "train.jsonl", out) for mode in ("cached", "uncached")}
    result = {
        "benchmark": "training",
        "machine": machine_info(args.device),
        "threads": threads,
        "quick": args.quick,
        "recipe": str(RECIPE.relative_to(PROJECT_ROOT)),
        "lora": not args.full_layers,
        "results": results,
        "cached_speedup": round(results["uncached"]["seconds_per_step"] / results["cached"]["seconds_per_step"], 3),
    }
    return emit(result, args.json_out)


if __name__ == "__main__":
    main()
