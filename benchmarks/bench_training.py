"""Training throughput (examples/s, input tokens/s): full pass, teacher cache, frozen-prefix cache.

The same recipe (``--recipe``, default.yaml by default: SmolLM2-135M, LoRA on the top 6 layers,
batch 8) and the same batches in every mode but the last:

    full                    the recipe as it is (trainable look-ahead vectors), the frozen
                            teacher run at every step
    teacher_cache           the same, teacher targets computed once before training
    lookahead_frozen        teacher cached, look-ahead vectors frozen, still the full pass:
                            what freezing alone buys (backward stops at the top layers)
    prefix_k4/_k6/_k8       model.frozen_prefix at K = 4, 6, 8 trainable top layers: cached
                            states of the layers below, teacher run at every step
    all                     frozen prefix at the recipe's K, teacher cached, length-bucketed
                            batches (training.bucket_by_length), threads = physical cores

The modes run in one process and are timed in alternation (bench_common.interleaved_times),
so load from other processes on a shared machine hits them alike. One-time costs (teacher
targets, prefix states) are reported per example, and the caches' size per 10k examples.

    python benchmarks/bench_training.py [--quick] [--json-out out.json] [--device cpu|cuda]
    python benchmarks/bench_training.py --repeats 5 --ks 4 6 8 --batch-size 8
    python benchmarks/bench_training.py --recipe instemb_rag/training/recipes/instruction-steering.yaml --ks 6

Needs ../shared/data (records are built from it into runs/bench_training/data).
"""

from __future__ import annotations

import copy
import os
import statistics
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace  # what run_step reads of a LlmTargetCache: .targets

from bench_common import PROJECT_ROOT, SHARED_DATA, apply_threads, base_parser, emit, interleaved_times, machine_info

RECIPES = PROJECT_ROOT / "instemb_rag" / "training" / "recipes"
GOAL_EXAMPLES_PER_S = 4.5  # issue 27: >= 5x the full pass's 0.907/s, at batch 8 on the 2-core dev CPU
SETS = ["msmarco_qa", "pubmedqa", "condaqa", "scifact_stance"]


class Setup:
    """One student (config, encoder, optimizer) and, for the frozen-prefix modes, its cached runner."""

    def __init__(self, args, train_file: Path, overrides: dict):
        import torch

        from instemb_rag.training.args import load_config
        from instemb_rag.training.student import build_optimizer, load_student, make_trainable

        values = {
            "data.train_file": str(train_file),
            "training.batch_size": args.batch_size,
            "training.device": args.device,
            "training.max_steps": 1000,
            **overrides,
        }
        if args.model:
            values["model.model_name_or_path"] = args.model
        if args.full_layers:
            values["model.lora_rank"] = 0
        self.config = load_config(args.recipe, values)
        torch.manual_seed(0)
        self.encoder = load_student(self.config, torch.device(args.device))
        self.parts = make_trainable(self.encoder, self.config)
        self.optimizer, _ = build_optimizer(self.encoder, self.parts, self.config)
        self.student = None

    def build_prefix(self, root: Path, records, indices: list[int]) -> dict:
        """Fill the frozen-prefix cache for these records; its one-time cost and size."""
        import torch

        from instemb_rag.training.lookahead.cached_student import CachedStudent, student_inputs
        from instemb_rag.training.prefix_cache import PrefixCache, input_key

        model = self.config.model
        cache = PrefixCache(root, self.encoder, model.trainable_top_layers, getattr(torch, model.frozen_prefix_dtype))
        inputs = student_inputs([records[i] for i in indices], self.config)
        started = time.perf_counter()
        cache.build(inputs, batch_size=self.config.training.batch_size, log=lambda _: None)
        seconds = time.perf_counter() - started
        self.student = CachedStudent(self.encoder, cache)
        tokens = sum(cache.index[key][2] for key in {input_key(*pair) for pair in inputs})
        state_bytes = tokens * self.encoder.hidden_size * cache.dtype.itemsize
        return {
            "split": cache.split,
            "seconds_per_example": round(seconds / len(indices), 3),
            "bytes_per_10k_examples": round(state_bytes / len(indices) * 10_000),
        }


def teacher_bytes_per_example(lookahead_length: int, hidden: int) -> int:
    """A teacher cache row: look-ahead targets and anchor (float32) and the mask (one byte each)."""
    return (lookahead_length + 1) * hidden * 4 + lookahead_length


def padding_fraction(encoder, records, batches: list[list[int]]) -> float:
    """Padded query-pass positions / all positions over these batches (what bucketing cuts)."""
    padded = real = 0
    for batch in batches:
        lengths = [len(encoder.build_ids(records[i].text, records[i].instruction)) for i in batch]
        padded += len(lengths) * max(lengths)
        real += sum(lengths)
    return 1 - real / padded


def load_average() -> float | None:
    """The 1-minute load average: on a shared machine, how much else ran beside the benchmark."""
    return round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None


def parse_args(argv):
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=None, help="timed steps per mode (default 3, quick 1)")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--ks", type=int, nargs="+", default=[4, 6, 8], help="trainable top layers, prefix modes")
    parser.add_argument(
        "--recipe",
        type=Path,
        default=RECIPES / "default.yaml",
        help="training recipe (default: default.yaml; instruction-steering.yaml is one the cache applies to as it is)",
    )
    parser.add_argument("--model", default=None, help="backbone or checkpoint; default: the recipe's")
    parser.add_argument("--full-layers", action="store_true", help="train the top layers fully instead of LoRA")
    parser.add_argument("--per-set", type=int, default=None, help="records built per data set (default 50, quick 30)")
    return parser.parse_args(argv)


def set_threads(args) -> int:
    """--threads, else the trainer's own choice (training/cpu_threads.py)."""
    if args.threads:
        return apply_threads(args.threads)
    from instemb_rag.training.cpu_threads import set_training_threads

    set_training_threads("cuda" if args.device.startswith("cuda") else "cpu")
    return apply_threads(None)


PREFIX = {"model.train_lookahead": False, "model.frozen_prefix": True}


def prefix_setups(args, train_file: Path, records, used: list[int], folder: Path, recipe_k: int):
    """A frozen-prefix student per K with its cache built: (setups by K, one-time costs, skipped Ks)."""
    from instemb_rag.errors import InstEmbError

    setups, costs, skipped = {}, {}, {}
    for k in sorted(set(args.ks) | {recipe_k}):
        try:
            setup = Setup(args, train_file, {**PREFIX, "model.trainable_top_layers": k})
            costs[f"k{k}"] = setup.build_prefix(folder, records, used)
            setups[k] = setup
        except InstEmbError as exc:  # K >= the layer count, a checkpoint's LoRA on other layers, ...
            skipped[f"prefix_k{k}"] = str(exc)
    if recipe_k not in setups:
        raise InstEmbError(
            f"The recipe's own K={recipe_k} cannot use the frozen prefix: {skipped[f'prefix_k{recipe_k}']}"
        )
    return setups, costs, skipped


def cached_teacher(recipe: Setup, records, used: list[int], batch_size: int):
    """(a frozen teacher copy, its targets for ``used`` as run_step reads a LlmTargetCache, seconds per example)."""
    from instemb_rag.training.lookahead.frozen_llm import MappedTargets, compute_llm_targets

    teacher = copy.deepcopy(recipe.encoder).eval()
    for param in teacher.parameters():
        param.requires_grad_(False)
    started = time.perf_counter()
    targets = compute_llm_targets(
        teacher, [records[i] for i in used], recipe.encoder.lookahead.length, batch_size, recipe.config.training.bf16
    )
    seconds = (time.perf_counter() - started) / len(used)
    return teacher, SimpleNamespace(targets=MappedTargets(targets, {i: row for row, i in enumerate(used)})), seconds


def bench_batches(records, batch_size: int, steps: int) -> tuple[list[list[int]], list[list[int]]]:
    """The first ``steps`` micro-batches of the trainer's data order, plain and length-bucketed."""
    from instemb_rag.training.batch_order import BatchOrder, record_lengths

    groups = [r.group for r in records]
    plain = BatchOrder.records(groups, batch_size, 1, 0)
    bucketed = BatchOrder.records(groups, batch_size, 1, 0, record_lengths(records))
    return [plain.micro_batch(p) for p in range(steps)], [bucketed.micro_batch(p) for p in range(steps)]


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    load_before = load_average()
    repeats = args.repeats or (1 if args.quick else 3)
    threads = set_threads(args)
    if not SHARED_DATA.is_dir():
        return emit({"benchmark": "training", "skipped": f"{SHARED_DATA} is absent"}, args.json_out)
    from instemb_rag.datasets.builders import build_data_folder
    from instemb_rag.datasets.records import read_records
    from instemb_rag.training.lookahead.objective import run_step

    per_set = args.per_set or (30 if args.quick else 50)
    data = PROJECT_ROOT / "runs" / "bench_training" / f"data-{per_set}"
    build_data_folder(data, SHARED_DATA, SETS, max_per_set=per_set, seed=0)
    records = read_records(data / "train.jsonl")
    plain, bucketed = bench_batches(records, args.batch_size, repeats + 1)  # +1: the warm-up step
    used = sorted({i for batch in plain + bucketed for i in batch})
    recipe = Setup(args, data / "train.jsonl", {})
    recipe_k = recipe.config.model.trainable_top_layers
    teacher, teacher_cache, teacher_s = cached_teacher(recipe, records, used, args.batch_size)
    with tempfile.TemporaryDirectory(prefix="bench-prefix-") as folder:
        setups, prefix_costs, skipped = prefix_setups(args, data / "train.jsonl", records, used, Path(folder), recipe_k)
        # name -> (setup, teacher cached?, prefix runner?, batches)
        modes = {
            "full": (recipe, False, False, plain),
            "teacher_cache": (recipe, True, False, plain),
            "lookahead_frozen": (setups[recipe_k], True, False, plain),
            **{f"prefix_k{k}": (setups[k], False, True, plain) for k in args.ks if k in setups},
            "all": (setups[recipe_k], True, True, bucketed),
        }
        results = time_modes(modes, records, teacher_cache, teacher, run_step, repeats, args)
    for name, (setup, _, _, batches) in modes.items():
        results[name]["padding_fraction"] = round(padding_fraction(setup.encoder, records, batches[1:]), 3)
    length, hidden = recipe.encoder.lookahead.length, recipe.encoder.hidden_size
    result = {
        "benchmark": "training",
        "machine": machine_info(str(recipe.encoder.device)),
        "load_average_before": load_before,
        "load_average_after": load_average(),
        "threads": threads,
        "quick": args.quick,
        "recipe": str(args.recipe),
        "lora": recipe.config.model.lora_rank > 0,
        "batch_size": args.batch_size,
        "recipe_trainable_top_layers": recipe_k,
        "results": results,
        "skipped_modes": skipped,
        "speedup_over_full": {
            name: round(results["full"]["seconds_per_step"] / r["seconds_per_step"], 2) for name, r in results.items()
        },
        "goal_examples_per_s": GOAL_EXAMPLES_PER_S,
        "teacher_cache_seconds_per_example": round(teacher_s, 3),
        "teacher_cache_bytes_per_10k_examples": teacher_bytes_per_example(length, hidden) * 10_000,
        "prefix_cache": prefix_costs,
    }
    return emit(result, args.json_out)


def time_modes(modes: dict, records, teacher_cache, teacher, run_step, repeats: int, args) -> dict:
    """Median seconds per optimizer step of each mode, taking turns; examples/s and tokens/s from it."""
    tokens: dict[str, list[int]] = {name: [] for name in modes}
    cursor = dict.fromkeys(modes, 0)

    def step(name: str) -> None:
        setup, cached_teacher, use_prefix, batches = modes[name]
        batch = batches[cursor[name]]
        cursor[name] += 1
        setup.optimizer.zero_grad(set_to_none=True)
        _, count = run_step(
            setup.encoder,
            setup.config,
            records,
            [batch],
            teacher_cache if cached_teacher else None,
            None if cached_teacher else teacher,
            student=setup.student if use_prefix else None,
        )
        tokens[name].append(count)
        setup.optimizer.step()

    device = "cuda" if args.device.startswith("cuda") else "cpu"
    samples = interleaved_times({name: (lambda n=name: step(n)) for name in modes}, repeats, device)
    results = {}
    for name, times in samples.items():
        seconds = statistics.median(times)
        timed_tokens = statistics.mean(tokens[name][1:])  # the warm-up step is not timed
        results[name] = {
            "seconds_per_step": round(seconds, 3),
            "examples_per_s": round(args.batch_size / seconds, 3),
            "input_tokens_per_s": round(timed_tokens / seconds, 1),
            "samples_s": [round(t, 3) for t in times],
        }
    return results


if __name__ == "__main__":
    main()
