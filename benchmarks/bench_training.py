"""Training throughput (examples/s, input tokens/s) with and without the teacher cache.

With the cache, teacher targets are computed once before training (reported separately as
a one-time cost per record); without it, the frozen initial model runs on ``[x; y[:L]]``
at every step, as a trainer holding a teacher copy would. Both modes run in one process
on the same batches and are timed in alternation (bench_common.interleaved_times), so load
from other processes on a shared machine hits them alike.

    python benchmarks/bench_training.py [--quick] [--json-out out.json] [--device cpu|cuda]
    python benchmarks/bench_training.py --repeats 5 --device cuda --batch-size 8

Needs ../shared/data (records are built from it into runs/bench_training/data).
"""

from __future__ import annotations

import copy
import statistics
import time
from pathlib import Path

from bench_common import PROJECT_ROOT, SHARED_DATA, apply_threads, base_parser, emit, interleaved_times, machine_info

RECIPE = PROJECT_ROOT / "instemb_rag" / "training" / "recipes" / "default.yaml"


def build_trainer_parts(args, train_file: Path):
    """Encoder, records, config, optimizer and a frozen teacher copy, as train() builds them."""
    import torch

    from instemb_rag.training.args import load_config
    from instemb_rag.training.records import read_records
    from instemb_rag.training.trainer import build_optimizer, load_student, make_trainable

    overrides = {
        "data.train_file": str(train_file),
        "training.batch_size": args.batch_size,
        "training.device": args.device,
        "training.max_steps": 1000,
    }
    if args.model:
        overrides["model.model_name_or_path"] = args.model
    if args.full_layers:
        overrides["model.lora_rank"] = 0
    config = load_config(RECIPE, overrides)
    encoder = load_student(config, torch.device(args.device))
    teacher = copy.deepcopy(encoder).eval()
    for param in teacher.parameters():
        param.requires_grad_(False)
    parts = make_trainable(encoder, config)
    optimizer, _ = build_optimizer(encoder, parts, config)
    return config, encoder, teacher, read_records(train_file), optimizer


def main(argv: list[str] | None = None) -> dict:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=None, help="timed steps per mode (default 3, quick 1)")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--model", default=None, help="backbone folder; default: the default backbone")
    parser.add_argument("--full-layers", action="store_true", help="train the top layers fully instead of LoRA")
    args = parser.parse_args(argv)
    repeats = args.repeats or (1 if args.quick else 3)
    threads = apply_threads(args.threads)
    if not SHARED_DATA.is_dir():
        return emit({"benchmark": "training", "skipped": f"{SHARED_DATA} is absent"}, args.json_out)
    from instemb_rag.training.builders import build_data_folder
    from instemb_rag.training.teacher_cache import compute_teacher_targets
    from instemb_rag.training.trainer import run_step

    out = PROJECT_ROOT / "runs" / "bench_training"
    build_data_folder(
        out / "data", SHARED_DATA, ["msmarco_qa", "pubmedqa", "condaqa", "scifact_stance"], max_per_set=50, seed=0
    )
    config, encoder, teacher, records, optimizer = build_trainer_parts(args, out / "data" / "train.jsonl")
    length = encoder.lookahead.length
    batches = [list(range(i * args.batch_size, (i + 1) * args.batch_size)) for i in range(repeats + 1)]
    used = sorted({i for batch in batches for i in batch})

    started = time.perf_counter()
    targets = compute_teacher_targets(
        teacher, [records[i] for i in used], length, args.batch_size, config.training.bf16
    )
    teacher_s = time.perf_counter() - started

    class CachedTargets:  # the slice of a TeacherCache that run_step reads
        def __init__(self, all_targets):
            self.targets = all_targets

    cache = CachedTargets(targets)
    tokens = {}
    cursor = {"cached": 0, "uncached": 0}

    def step(mode: str):
        indices = batches[cursor[mode]]
        cursor[mode] += 1
        optimizer.zero_grad(set_to_none=True)
        _, tokens[mode] = run_step(encoder, config, records, [indices], cache if mode == "cached" else None, teacher)
        optimizer.step()

    samples = interleaved_times(
        {mode: (lambda m=mode: step(m)) for mode in ("cached", "uncached")}, repeats, str(encoder.device)
    )
    results = {}
    for mode, times in samples.items():
        seconds = statistics.median(times)
        results[mode] = {
            "seconds_per_step": round(seconds, 2),
            "examples_per_s": round(args.batch_size / seconds, 3),
            "input_tokens_per_s": round(tokens[mode] / seconds, 1),
            "samples_s": [round(t, 2) for t in times],
        }
    result = {
        "benchmark": "training",
        "machine": machine_info(str(encoder.device)),
        "threads": threads,
        "quick": args.quick,
        "recipe": str(RECIPE.relative_to(PROJECT_ROOT)),
        "lora": not args.full_layers,
        "batch_size": args.batch_size,
        "results": results,
        "teacher_cache_seconds_per_record": round(teacher_s / len(used), 3),
        "cached_speedup": round(results["uncached"]["seconds_per_step"] / results["cached"]["seconds_per_step"], 3),
    }
    return emit(result, args.json_out)


if __name__ == "__main__":
    main()
