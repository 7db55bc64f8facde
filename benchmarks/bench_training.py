"""Training throughput (examples/s, input tokens/s): full pass, LLM-target cache, frozen-prefix cache, query LLM.

The same recipe (``--recipe``, default.yaml by default: SmolLM2-135M, LoRA on the top 6 layers,
batch 8) and the same batches (the trainer's ``BatchOrder.records``) in every mode but ``all``:

    full                    the recipe as it is (trainable look-ahead vectors), the frozen
                            LLM run at every step for its targets
    llm_target_cache        the same, the frozen LLM's targets computed once before training
                            (training.llm_target_cache)
    lookahead_frozen        targets cached, look-ahead vectors frozen, still the full pass:
                            what freezing alone buys (backward stops at the top layers)
    prefix_k4/_k6/_k8       model.frozen_prefix at K = 4, 6, 8 trainable top layers: cached
                            states of the layers below, the frozen LLM run at every step
    all                     frozen prefix at the recipe's K, targets cached, length-bucketed
                            batches (training.bucket_by_length), threads = physical cores
    query_tower             the two-tower objective's own step (TwoTowerObjective.step):
                            instruction + query only, the top K layers on the same frozen-prefix
                            cache, a head into the document sentence encoder's space and InfoNCE against
                            its passage vectors (random unit vectors of all-MiniLM-L6-v2's width
                            stand in for the cached ones: a step reads them from memory either way)

Each mode's examples/s is reported with its ratio to the full pass (``speedup_over_full``); the
goal (issue 27, kept by issue 51) is ``all`` >= 5x the full pass. The modes run in one process
and are timed in alternation (bench_common.interleaved_times), so load from other processes on
a shared machine hits them alike. One-time costs (LLM targets, prefix states) are reported per
example, and the caches' size per 10k examples.

    python benchmarks/bench_training.py [--quick] [--json-out out.json] [--device cpu|cuda]
    python benchmarks/bench_training.py --repeats 5 --ks 4 6 8 --batch-size 8
    python benchmarks/bench_training.py --recipe instemb_rag/training/recipes/instruction-steering.yaml --ks 6
    python benchmarks/bench_training.py --smoke     # seconds: tiny random model, 16 records

Needs ../shared/data (records are built from it into runs/bench_training/data); ``--smoke``
builds 16 records from it into a scratch folder, or writes 16 made-up records where it is absent.
"""

from __future__ import annotations

import copy
import os
import random
import statistics
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace  # what run_step reads of a LlmTargetCache: .targets
from typing import Callable

from bench_common import (
    PROJECT_ROOT,
    SHARED_DATA,
    apply_threads,
    base_parser,
    emit,
    interleaved_times,
    machine_info,
    smoke_run,
    tiny_sentence_encoder,
)

RECIPES = PROJECT_ROOT / "instemb_rag" / "training" / "recipes"
# issue 27, kept by issue 51: the frozen-prefix path (mode "all") at >= 5x the full pass's examples/s
GOAL_SPEEDUP_OVER_FULL = 5.0
GOAL_MODE = "all"
SETS = ["msmarco_qa", "pubmedqa", "condaqa", "scifact_stance"]
# The two-tower recipe's document sentence encoder (all-MiniLM-L6-v2): the width of its cached vectors.
TOWER_DIMENSION = 384
# --smoke: the tiny model's layers, its recipe K and the Ks of the prefix modes
SMOKE_LAYERS, SMOKE_K, SMOKE_KS = 3, 1, [1, 2]


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
            **args.recipe_overrides,
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
        self.cache = None

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
        self.cache, self.student = cache, CachedStudent(self.encoder, cache)
        tokens = sum(cache.index[key][2] for key in {input_key(*pair) for pair in inputs})
        state_bytes = tokens * self.encoder.hidden_size * cache.dtype.itemsize
        return {
            "split": cache.split,
            "seconds_per_example": round(seconds / len(indices), 3),
            "bytes_per_10k_examples": round(state_bytes / len(indices) * 10_000),
        }


def llm_target_bytes_per_example(lookahead_length: int, hidden: int) -> int:
    """An LLM-target cache row: look-ahead targets and anchor (float32) and the mask (one byte each)."""
    return (lookahead_length + 1) * hidden * 4 + lookahead_length


def padding_fraction(encoder, records, steps: list[list[list[int]]]) -> float:
    """Padded query-pass positions / all positions over these steps' micro-batches (what bucketing cuts)."""
    padded = real = 0
    for batch in (batch for step in steps for batch in step):
        lengths = [len(encoder.build_ids(records[i].text, records[i].instruction)) for i in batch]
        padded += len(lengths) * max(lengths)
        real += sum(lengths)
    return 1 - real / padded


def load_average() -> float | None:
    """The 1-minute load average: on a shared machine, how much else ran beside the benchmark."""
    return round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None


def parse_args(argv):
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=None, help="timed steps per mode (default 3, quick and smoke 1)")
    parser.add_argument("--batch-size", type=int, default=None, help="records a step (default 8, smoke 4)")
    parser.add_argument(
        "--ks", type=int, nargs="+", default=None, help="trainable top layers, prefix modes (default 4 6 8)"
    )
    parser.add_argument(
        "--recipe",
        type=Path,
        default=RECIPES / "default.yaml",
        help="training recipe (default: default.yaml; instruction-steering.yaml is one the cache applies to as it is)",
    )
    parser.add_argument("--model", default=None, help="backbone (HF folder) or LLM folder; default: the recipe's")
    parser.add_argument("--full-layers", action="store_true", help="train the top layers fully instead of LoRA")
    parser.add_argument(
        "--per-set", type=int, default=None, help="records built per data set (default 50, quick 30, smoke 4)"
    )
    args = parser.parse_args(argv)
    args.batch_size = args.batch_size or (4 if args.smoke else 8)
    args.ks = args.ks or (SMOKE_KS if args.smoke else [4, 6, 8])
    args.per_set = args.per_set or (4 if args.smoke else 30 if args.quick else 50)
    # --smoke: the recipe's K on the tiny model's 3 layers
    args.recipe_overrides = {"model.trainable_top_layers": SMOKE_K} if args.smoke else {}
    return args


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
        except InstEmbError as exc:  # K >= the layer count, an LLM folder's LoRA on other layers, ...
            skipped[f"prefix_k{k}"] = str(exc)
    if recipe_k not in setups:
        raise InstEmbError(
            f"The recipe's own K={recipe_k} cannot use the frozen prefix: {skipped[f'prefix_k{recipe_k}']}"
        )
    return setups, costs, skipped


def cached_llm_targets(recipe: Setup, records, used: list[int], batch_size: int):
    """(a frozen LLM copy, its targets for ``used`` as run_step reads a LlmTargetCache, seconds per example)."""
    from instemb_rag.training.lookahead.frozen_llm import MappedTargets, compute_llm_targets

    frozen = copy.deepcopy(recipe.encoder).eval()
    for param in frozen.parameters():
        param.requires_grad_(False)
    t = recipe.config.training
    started = time.perf_counter()
    targets = compute_llm_targets(
        frozen,
        [records[i] for i in used],
        recipe.encoder.lookahead.length,
        batch_size,
        t.bf16,
        t.distill_content_words,
    )
    seconds = (time.perf_counter() - started) / len(used)
    return frozen, SimpleNamespace(targets=MappedTargets(targets, {i: row for row, i in enumerate(used)})), seconds


def bench_steps(records, batch_size: int, steps: int) -> tuple[list[list[list[int]]], list[list[list[int]]]]:
    """The first ``steps`` steps (each its list of micro-batches) of the trainer's data order
    (``BatchOrder.records``, one micro-batch a step), plain and length-bucketed."""
    from instemb_rag.training.batch_order import BatchOrder, record_lengths

    groups = [r.group for r in records]
    plain = BatchOrder.records(groups, batch_size, 1, 0)
    bucketed = BatchOrder.records(groups, batch_size, 1, 0, record_lengths(records))
    return [plain.step(n) for n in range(steps)], [bucketed.step(n) for n in range(steps)]


def smoke_records(count: int = 16):
    """Made-up records for --smoke where ../shared/data is absent: the tiny model's words, some
    records in groups (hard negatives meet in a batch), some with an instruction."""
    from instemb_rag.datasets.records import TrainingRecord

    rng = random.Random(0)
    words = "the tent is light and durable for a camp trip in cold rain with water stove".split()

    def phrase(low: int, high: int) -> str:
        return " ".join(rng.choice(words) for _ in range(rng.randint(low, high)))

    return [
        TrainingRecord(
            text=phrase(4, 14),
            instruction=rng.choice(["what is the weight ?", "does it do well in rain ?", None]),
            output=phrase(2, 8),
            group=f"g{n // 2}" if n < 8 else None,
        )
        for n in range(count)
    ]


def training_data(args, scratch: Path | None) -> tuple[Path, str]:
    """The records file (built from ../shared/data; --smoke: into its scratch folder, made up where
    the data are absent) and what it holds."""
    from instemb_rag.datasets.builders import build_data_folder
    from instemb_rag.datasets.records import write_records

    if scratch is None:
        folder = PROJECT_ROOT / "runs" / "bench_training" / f"data-{args.per_set}"
    else:
        folder = scratch / "data"
        if not all((SHARED_DATA / name).is_dir() for name in SETS):
            write_records(folder / "train.jsonl", smoke_records())
            return folder / "train.jsonl", f"16 made-up records ({SHARED_DATA} lacks {', '.join(SETS)})"
    build_data_folder(folder, SHARED_DATA, SETS, max_per_set=args.per_set, seed=0)
    return folder / "train.jsonl", f"{args.per_set} records per set of {', '.join(SETS)}"


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    load_before = load_average()
    repeats = args.repeats or (1 if args.quick or args.smoke else 3)
    if not SHARED_DATA.is_dir() and not args.smoke:
        return emit({"benchmark": "training", "skipped": f"{SHARED_DATA} is absent"}, args.json_out)
    with smoke_run(args, layers=SMOKE_LAYERS) as scratch:
        threads = set_threads(args)
        result = measure(args, repeats, scratch)
    result.update({"load_average_before": load_before, "load_average_after": load_average(), "threads": threads})
    return emit(result, args.json_out)


def measure(args, repeats: int, scratch: Path | None) -> dict:
    from instemb_rag.datasets.records import read_records
    from instemb_rag.training.lookahead.objective import run_step

    train_file, data = training_data(args, scratch)
    records = read_records(train_file)
    plain, bucketed = bench_steps(records, args.batch_size, repeats + 1)  # +1: the warm-up step
    used = sorted({i for step in plain + bucketed for batch in step for i in batch})
    recipe = Setup(args, train_file, {})
    recipe_k = recipe.config.model.trainable_top_layers
    frozen_llm, target_cache, targets_s = cached_llm_targets(recipe, records, used, args.batch_size)
    with tempfile.TemporaryDirectory(prefix="bench-prefix-") as folder:
        setups, prefix_costs, skipped = prefix_setups(args, train_file, records, used, Path(folder), recipe_k)

        def lookahead(setup: Setup, cached_targets: bool, use_prefix: bool) -> Callable[[list[list[int]]], int]:
            """One optimizer step of the look-ahead objective (run_step, as the trainer runs it): input tokens."""

            def step(micro_batches: list[list[int]]) -> int:
                setup.optimizer.zero_grad(set_to_none=True)
                _, tokens = run_step(
                    setup.encoder,
                    setup.config,
                    records,
                    micro_batches,
                    target_cache if cached_targets else None,
                    None if cached_targets else frozen_llm,
                    student=setup.student if use_prefix else None,
                )
                setup.optimizer.step()
                return tokens

            return step

        # name -> (setup, steps (each its micro-batches), one optimizer step)
        modes = {
            "full": (recipe, plain, lookahead(recipe, False, False)),
            "llm_target_cache": (recipe, plain, lookahead(recipe, True, False)),
            "lookahead_frozen": (setups[recipe_k], plain, lookahead(setups[recipe_k], True, False)),
            **{f"prefix_k{k}": (setups[k], plain, lookahead(setups[k], False, True)) for k in args.ks if k in setups},
            "all": (setups[recipe_k], bucketed, lookahead(setups[recipe_k], True, True)),
            "query_tower": (setups[recipe_k], plain, query_tower_step(setups[recipe_k], records, plain, scratch)),
        }
        results = time_modes(modes, repeats, args)
    for name, (setup, steps, _) in modes.items():
        results[name]["padding_fraction"] = round(padding_fraction(setup.encoder, records, steps[1:]), 3)
    length, hidden = recipe.encoder.lookahead.length, recipe.encoder.hidden_size
    return {
        "benchmark": "training",
        "machine": machine_info(str(recipe.encoder.device)),
        "quick": args.quick,
        "smoke": args.smoke,
        "recipe": str(args.recipe),
        "model": args.model or "the recipe's",
        "data": data,
        "lora": recipe.config.model.lora_rank > 0,
        "batch_size": args.batch_size,
        "recipe_trainable_top_layers": recipe_k,
        "results": results,
        "skipped_modes": skipped,
        "speedup_over_full": {
            name: round(r["examples_per_s"] / results["full"]["examples_per_s"], 2) for name, r in results.items()
        },
        "goal_mode": GOAL_MODE,
        "goal_speedup_over_full": GOAL_SPEEDUP_OVER_FULL,
        "llm_target_cache_seconds_per_example": round(targets_s, 3),
        "llm_target_cache_bytes_per_10k_examples": llm_target_bytes_per_example(length, hidden) * 10_000,
        "prefix_cache": prefix_costs,
        "query_tower": {
            "tower_dimension": TOWER_DIMENSION,
            "bank_negatives": recipe.config.two_tower.bank_negatives,
            "inputs": "instruction + query (the records' text and instruction), on the K="
            f"{recipe_k} frozen-prefix cache; random unit vectors stand in for the document sentence encoder's",
        },
    }


def query_tower_step(
    setup: Setup, records, steps: list[list[list[int]]], scratch: Path | None = None
) -> Callable[[list[list[int]]], int]:
    """One optimizer step of the two-tower objective: ``TwoTowerObjective.step`` itself, on
    the state its ``prepare`` builds, with this setup's student and frozen-prefix cache (the
    records' (text, instruction) are in it) and a head into a document sentence encoder's space at zero.
    The document sentence encoder's cached passage and anchor vectors are random unit vectors of its width:
    a run reads them from memory, so their values cost nothing. The bank holds enough passages
    for the recipe's ``bank_negatives`` sample. Returns input tokens, as the look-ahead steps do."""
    import torch
    import torch.nn.functional as F

    from instemb_rag.datasets.embedding_items import EmbeddingItem
    from instemb_rag.encoder.composed.encoder import TwoTowerEncoder
    from instemb_rag.encoder.modules.projection import Projection
    from instemb_rag.encoder.modules.sentence_encoder import SentenceEncoder
    from instemb_rag.training.batch_order import BatchOrder
    from instemb_rag.training.cached_vectors import RankingData
    from instemb_rag.training.parallel import SINGLE_PROCESS
    from instemb_rag.training.student import optimizer_with_head
    from instemb_rag.training.two_tower.objective import TwoTowerObjective

    config, encoder = setup.config, setup.encoder
    q, device = config.two_tower, encoder.device
    queries = [
        EmbeddingItem(str(n), "query", r.text, r.instruction, r.group, positive=f"p{n}") for n, r in enumerate(records)
    ]
    group_rows: dict[str, list[int]] = {}
    for n, record in enumerate(records):
        if record.group:
            group_rows.setdefault(record.group, []).append(n)
    # The objective's document sentence encoder: minilm (--smoke: tests/testing.py's tiny one, in the scratch folder).
    sentence_encoder_reference = (
        str(tiny_sentence_encoder(scratch / "tiny_sentence_encoder")) if scratch is not None else "minilm"
    )
    sentence_encoder = SentenceEncoder.load(
        SentenceEncoder.recorded_reference(sentence_encoder_reference), device=str(device)
    )
    generator = torch.Generator().manual_seed(0)
    passages = q.bank_negatives + len(records)  # the positives, and a bank for the full sample

    def unit_rows(count: int) -> torch.Tensor:
        return F.normalize(torch.randn(count, sentence_encoder.dimension, generator=generator), dim=-1)

    objective = TwoTowerObjective(config, SINGLE_PROCESS, device, log=lambda _: None)
    objective.cache = setup.cache
    objective.data = RankingData(
        queries, list(range(len(records))), group_rows, unit_rows(passages), unit_rows(len(records))
    )
    batches = [batch for step in steps for batch in step]  # one batch a step (items mode reads one)
    objective.order = BatchOrder(lambda _epoch: batches)
    head = Projection(encoder.hidden_size, sentence_encoder.dimension).to(device)
    with torch.no_grad():  # the run starts at the anchor
        head.linear.weight.zero_()
        head.linear.bias.zero_()
    objective.head = head
    # The objective's encoder, as its prepare builds it: the student with the head, anchored on the
    # document sentence encoder (the random unit vectors above stand in for the sentence encoder's cached vectors).
    objective.encoder = TwoTowerEncoder(encoder.with_projection(head), sentence_encoder, anchored=True)
    optimizer, _ = optimizer_with_head(setup.parts, head, config.training, q.head_learning_rate)
    position = {tuple(batch): n for n, batch in enumerate(batches)}
    length = encoder.lookahead.length

    def step(micro_batches: list[list[int]]) -> int:
        optimizer.zero_grad(set_to_none=True)
        objective.step(position[tuple(micro_batches[0])])
        optimizer.step()
        batch = micro_batches[0]
        return sum(len(encoder.build_ids(records[i].text, records[i].instruction, length)) for i in batch)

    return step


def time_modes(modes: dict, repeats: int, args) -> dict:
    """Median seconds per optimizer step of each mode, taking turns; examples/s and tokens/s from it
    (the timed steps' mean examples and input tokens: an epoch's last batch may be short)."""
    tokens: dict[str, list[int]] = {name: [] for name in modes}
    examples: dict[str, list[int]] = {name: [] for name in modes}
    cursor = dict.fromkeys(modes, 0)

    def step(name: str) -> None:
        _, steps, run = modes[name]
        micro_batches = steps[cursor[name]]
        tokens[name].append(run(micro_batches))
        examples[name].append(sum(len(batch) for batch in micro_batches))
        cursor[name] += 1

    device = "cuda" if args.device.startswith("cuda") else "cpu"
    samples = interleaved_times({name: (lambda n=name: step(n)) for name in modes}, repeats, device)
    results = {}
    for name, times in samples.items():
        seconds = statistics.median(times)
        # the warm-up step is not timed
        timed_tokens, timed_examples = statistics.mean(tokens[name][1:]), statistics.mean(examples[name][1:])
        results[name] = {
            "seconds_per_step": round(seconds, 3),
            "examples_per_step": timed_examples,
            "examples_per_s": round(timed_examples / seconds, 3),
            "input_tokens_per_s": round(timed_tokens / seconds, 1),
            "samples_s": [round(t, 3) for t in times],
        }
    return results


if __name__ == "__main__":
    main()
