"""``bench_gpu.py --shape NAME``: issue 57's goals on random weights of a named shape, eager vs the CUDA path.

    python benchmarks/bench_gpu.py --device cuda --shape default  [--quick] [--tokenizer DIR] [--json-out F]
    python benchmarks/bench_gpu.py --device cuda --shape llama-8b ...
    python benchmarks/bench_gpu_shapes.py table F1.json F2.json ...   # the markdown table of such runs
    python benchmarks/bench_gpu.py --shape default --smoke            # the same on the CPU, tiny shape

The backbone is built with random weights on the device (timing does not depend on the weights'
values, and no weights travel): ``default`` is the config of the tokenizer folder (the shipped
default's: SmolLM2-135M, hidden 576, 30 layers), ``llama-1b`` hidden 2048 x 16 layers, ``llama-8b``
hidden 4096 x 32 layers, with that folder's tokenizer and vocabulary. Both modes run in the same
process, interleaved: ``eager`` (INSTEMB_CUDA_FAST=0: the loop of batch_size rows every device ran
before issue 57) and ``cuda_graphs`` (the CUDA path: one template call, shape buckets as CUDA
graphs, batches by tokens). Rows: one query + instruction p50/p99; 64 and 256 queries with
distinct instructions (queries/s); documents (tokens/s, the model FLOP rate over the bf16 matmul
peak measured in the same run); the profile of 10 single queries (GPU kernel time against wall,
kernels and launches per query); what capturing the buckets cost. ``goals`` says which of the
issue's goals the run met.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from bench_common import interleaved_times, machine_info, matmul_peak_gflops, median, percentile, time_once
from bench_encoder import INSTRUCTION, QUERY, forward_flops, load_documents

LLAMA = {"rope_theta": 500000.0, "num_key_value_heads": 8, "num_attention_heads": 32, "head_dim": 128}
SHAPES = {
    "default": {},  # the tokenizer folder's own config: the shipped default's shape
    "llama-1b": {**LLAMA, "hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 16, "head_dim": 64},
    "llama-8b": {**LLAMA, "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32},
}
MODES = {"eager": {"enabled": False}, "cuda_graphs": {"enabled": True, "graphs": True}}
# Issue 57's goals: (shape, mode, figure, bound, at most?)
GOALS = [
    ("default", "one query p50 <= 2 ms", ("query", "p50_ms"), 2.0, True),
    ("default", "one query p99 <= 3 ms", ("query", "p99_ms"), 3.0, True),
    ("default", "64 queries >= 20,000 queries/s", ("queries_64", "queries_per_s"), 20000.0, False),
    (
        "default",
        "documents >= 0.20 of the measured matmul peak",
        ("documents", "fraction_of_measured_peak"),
        0.20,
        False,
    ),
    (
        "llama-8b",
        "documents >= 0.65 of the measured matmul peak",
        ("documents", "fraction_of_measured_peak"),
        0.65,
        False,
    ),
]


def shape_folder(args) -> Path:
    """The folder whose tokenizer (and, for ``default``, config) the run takes: --tokenizer, --model
    (the tiny model of --smoke), else the shipped default's converted folder."""
    if getattr(args, "tokenizer", None) or getattr(args, "model", None):
        return Path(args.tokenizer or args.model)
    from instemb_rag.encoder.backbone import resolve_backbone_folder

    return resolve_backbone_folder(None)[1]


def random_encoder(shape: str, folder: Path, device: str):
    """An InstEmbEncoder (8 look-ahead tokens, DAAP, max_length 512) over random weights of the shape."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, LlamaConfig

    from instemb_rag import InstEmbEncoder
    from instemb_rag.encoder.backbone import Backbone
    from instemb_rag.encoder.device import default_dtype

    tokenizer = AutoTokenizer.from_pretrained(folder)
    config = AutoConfig.from_pretrained(folder)
    if SHAPES[shape]:
        special = {name: getattr(config, name, None) for name in ("bos_token_id", "eos_token_id", "pad_token_id")}
        config = LlamaConfig(
            vocab_size=config.vocab_size, max_position_embeddings=8192, rms_norm_eps=1e-5, **special, **SHAPES[shape]
        )
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(
            config, dtype=default_dtype(torch.device(device)), attn_implementation="sdpa"
        )
    model.eval()
    loaded = Backbone(model, tokenizer, f"random weights of the {shape} shape", folder, f"random-{shape}")
    return InstEmbEncoder.from_loaded_backbone(loaded, lookahead_length=8, max_length=512)


def distinct_queries(count: int) -> tuple[list[str], list[str]]:
    """``count`` queries, each under its own instruction (about the issue's 44 tokens each)."""
    aspects = ["durability", "weight", "price", "warmth", "packed size", "wind", "rain", "comfort"]
    queries = [f"{QUERY} number {i}" for i in range(count)]
    instructions = [f"Focus on the {aspects[i % len(aspects)]} of the product, point {i}." for i in range(count)]
    return queries, instructions


def switched(encoder, mode: str, call):
    """``call`` under ``mode``'s CUDA options (set on each call, so modes can be interleaved)."""
    from instemb_rag.encoder.fast import set_cuda_options

    def run():
        set_cuda_options(encoder, **MODES[mode])
        return call()

    return run


def profile_split(encoder, mode: str, device: str, count: int = 10) -> dict:
    """GPU kernel time against wall for ``count`` single queries, with kernels and launches per query."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    cuda = device.startswith("cuda")
    call = switched(encoder, mode, lambda: encoder.encode_queries([QUERY], [INSTRUCTION]))
    call()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        wall = time_once(lambda: [call() for _ in range(count)], device)
    events = prof.events()
    kernels = [event for event in events if event.device_type == torch.autograd.DeviceType.CUDA]
    launches = [event for event in events if event.name in ("cudaLaunchKernel", "cuLaunchKernel", "cudaGraphLaunch")]
    wall_ms = 1000 * wall / count
    kernel_ms = sum(event.time_range.elapsed_us() for event in kernels) / 1000 / count if cuda else None
    return {
        "queries": count,
        "wall_ms_per_query": wall_ms,
        "gpu_kernel_ms_per_query": kernel_ms,
        "gpu_busy_fraction": kernel_ms / wall_ms if kernel_ms is not None else None,
        "kernels_per_query": len(kernels) / count if cuda else None,
        "launch_calls_per_query": len(launches) / count if cuda else None,
    }


def measure_queries(encoder, modes: list[str], device: str, dry_run: bool, quick: bool) -> dict[str, dict]:
    """First query (capture included), one query p50/p99 and batches of distinct queries, per mode, interleaved."""
    repeats = 10 if dry_run else (50 if quick else 200)
    batch_repeats = 2 if dry_run else (5 if quick else 10)
    one = lambda: encoder.encode_queries([QUERY], [INSTRUCTION])  # noqa: E731
    found = {mode: {"first_query_ms": 1000 * time_once(switched(encoder, mode, one), device)} for mode in modes}
    single = interleaved_times({mode: switched(encoder, mode, one) for mode in modes}, repeats, device)
    for mode, samples in single.items():
        found[mode]["query"] = {"p50_ms": 1000 * median(samples), "p99_ms": 1000 * percentile(samples, 99)}
    for count in (8, 64) if dry_run else (64, 256):
        queries, instructions = distinct_queries(count)
        call = lambda q=queries, i=instructions, n=count: encoder.encode_queries(q, i, batch_size=n)  # noqa: E731
        times = interleaved_times({mode: switched(encoder, mode, call) for mode in modes}, batch_repeats, device)
        for mode, samples in times.items():
            found[mode][f"queries_{count}"] = {"ms": 1000 * median(samples), "queries_per_s": count / median(samples)}
    return found


def measure_documents(encoder, runs: dict[str, tuple], documents, device, repeats: int, peak: dict) -> dict[str, dict]:
    """Tokens/s and the FLOP rate over the measured peak, per mode: the best of its runs (name ->
    (mode, batch_size, batch_tokens)), all interleaved."""
    from instemb_rag.encoder.fast import set_cuda_options

    lengths = [len(encoder.build_ids(document, None)) for document in documents]
    tokens, flops = sum(lengths), sum(forward_flops(encoder, n) for n in lengths)

    def call(mode: str, size: int, batch_tokens: int | None):
        def run():
            set_cuda_options(encoder, **MODES[mode], **({"batch_tokens": batch_tokens} if batch_tokens else {}))
            return encoder.encode_documents(documents, batch_size=size)

        return run

    times = interleaved_times({name: call(*spec) for name, spec in runs.items()}, repeats, device)
    found = {}
    for mode in dict.fromkeys(spec[0] for spec in runs.values()):
        names = [name for name, spec in runs.items() if spec[0] == mode]
        best = min(names, key=lambda name: min(times[name]))
        seconds = min(times[best])
        found[mode] = {
            "best": best,
            "tokens_per_s": tokens / seconds,
            "model_gflops": flops / seconds / 1e9,
            "fraction_of_measured_peak": flops / seconds / 1e9 / peak["peak_gflops"],
            "by_run_tokens_per_s": {name: tokens / median(times[name]) for name in names},
        }
    return found


def compile_blocks(encoder) -> None:
    """The decoder blocks through torch.compile (regional, dynamic shapes), in place: the captured
    graphs then hold inductor's fused kernels (what INSTEMB_CUDA_INDUCTOR=1 with --compile does,
    without the fingerprint a compile cache needs: an 8B one would hash 16 GB)."""
    from instemb_rag.encoder.fast.compiled import repeated_blocks

    blocks = repeated_blocks(encoder.model.base_model)
    for block in blocks if blocks is not None else [encoder.model.base_model]:
        block.compile(dynamic=True)
    runner = encoder.__dict__.get("_cuda_runner")
    if runner is not None:  # graphs captured over the eager blocks go
        runner.buckets.clear()
        runner.capture_seconds.clear()
        runner.pool = None


def measure_shape(args, dry_run: bool) -> dict:
    import torch

    from instemb_rag.encoder.fast import cuda_graphs

    device = "cuda" if args.device in ("auto", "cuda") and torch.cuda.is_available() else args.device
    folder = shape_folder(args)
    encoder = random_encoder(args.shape, folder, device)
    small = args.quick or dry_run
    peak = matmul_peak_gflops(
        device,
        quick=small,
        dtype=torch.bfloat16 if device.startswith("cuda") else None,
        sizes=(256,) if dry_run else None,
    )
    documents, source = load_documents(8 if dry_run else (64 if args.quick else 256))
    lengths = [len(encoder.build_ids(document, None)) for document in documents]
    budgets = (1024,) if dry_run else (16384, 32768, 65536)
    runs = {f"eager batch {size}": ("eager", size, None) for size in ((8,) if dry_run else (32, 64, 128))}
    runs.update({f"cuda_graphs {tokens} tokens": ("cuda_graphs", 16, tokens) for tokens in budgets})
    result_modes = measure_queries(encoder, list(MODES), device, dry_run, args.quick)
    for mode, figures in measure_documents(encoder, runs, documents, device, 2 if small else 3, peak).items():
        result_modes[mode]["documents"] = figures
    for mode in MODES:
        result_modes[mode]["profile"] = profile_split(encoder, mode, device, 3 if dry_run else 10)
    runner = encoder.__dict__.get("_cuda_runner")
    result_modes["cuda_graphs"]["capture_seconds"] = dict(runner.capture_seconds) if runner is not None else {}
    if getattr(args, "inductor", False):  # last: compiling the blocks in place changes every mode after it
        started = time.perf_counter()
        compile_blocks(encoder)
        inductor = measure_queries(encoder, ["cuda_graphs"], device, dry_run, args.quick)["cuda_graphs"]
        inductor["first_query_ms"] = 1000 * (time.perf_counter() - started)  # compilation included
        runs = {f"cuda_graphs {tokens} tokens": ("cuda_graphs", 16, tokens) for tokens in budgets[-2:]}
        inductor["documents"] = measure_documents(encoder, runs, documents, device, 2, peak)["cuda_graphs"]
        inductor["profile"] = profile_split(encoder, "cuda_graphs", device, 3 if dry_run else 10)
        runner = encoder.__dict__.get("_cuda_runner")
        inductor["capture_seconds"] = dict(runner.capture_seconds) if runner is not None else {}
        result_modes["cuda_graphs_inductor"] = inductor
    config = encoder.model.config
    result = {
        "benchmark": "gpu_shape",
        "shape": args.shape,
        "dry_run": dry_run,
        "quick": args.quick,
        "machine": machine_info(device),
        "dtype": str(encoder.model.dtype).replace("torch.", ""),
        "config": {
            name: getattr(config, name, None)
            for name in (
                "hidden_size",
                "intermediate_size",
                "num_hidden_layers",
                "num_attention_heads",
                "num_key_value_heads",
                "vocab_size",
            )
        },
        "tokenizer_folder": str(folder),
        "query_tokens": len(encoder.build_ids(QUERY, INSTRUCTION)),
        "documents": {
            "source": source,
            "count": len(documents),
            "tokens": sum(lengths),
            "mean_tokens": sum(lengths) / len(documents),
        },
        "matmul_peak": {"dtype": "bf16" if device.startswith("cuda") else "fp32", **peak},
        "modes": result_modes,
        "fast_path_ran": cuda_graphs.fast_path_applies(encoder),
        "capture_error": getattr(encoder.__dict__.get("_cuda_runner"), "capture_error", None),
    }
    result["goals"] = goals_of(result)
    return result


def goals_of(result: dict) -> list[dict]:
    """The issue's goals for this shape, each met or not by the cuda_graphs mode (eager alongside)."""
    found = []
    for shape, label, (group, figure), bound, at_most in GOALS:
        if shape != result["shape"]:
            continue

        def meets(value: float, bound=bound, at_most=at_most) -> bool:
            return (value <= bound if at_most else value >= bound) and not result["dry_run"]

        value = result["modes"]["cuda_graphs"][group][figure]
        goal = {"goal": label, "value": value, "eager": result["modes"]["eager"][group][figure], "met": meets(value)}
        inductor = result["modes"].get("cuda_graphs_inductor")
        if inductor is not None:
            goal["inductor"] = inductor[group][figure]
            goal["met_with_inductor"] = meets(goal["inductor"])
        found.append(goal)
    return found


def fmt(value, digits: int = 2) -> str:
    if value is None:
        return "-"
    return f"{value:,.{digits}f}"


def table(results: list[dict]) -> str:
    """Markdown: one block of rows per shape, eager beside the CUDA path, then the goals."""
    third = any("cuda_graphs_inductor" in result["modes"] for result in results)
    lines = ["| shape | figure | eager | CUDA path |" + (" CUDA path + inductor |" if third else "")]
    lines.append("|---|---|---|---|" + ("---|" if third else ""))
    for result in results:
        name = result["shape"] + (" (DRY RUN, CPU)" if result["dry_run"] else "")
        eager = result["modes"]["eager"]
        shown = [result["modes"]["cuda_graphs"]] + ([result["modes"].get("cuda_graphs_inductor")] if third else [])
        rows = [
            (
                f"one query p50 / p99 ms ({result['query_tokens']} tokens)",
                lambda m: f"{fmt(m['query']['p50_ms'])} / {fmt(m['query']['p99_ms'])}",
            ),
            ("first query ms (the CUDA path: capture included)", lambda m: fmt(m["first_query_ms"], 1)),
        ]
        rows += [
            (
                f"{count} queries, distinct instructions: queries/s",
                lambda m, c=count: fmt(m[f"queries_{c}"]["queries_per_s"], 0),
            )
            for count in sorted(int(key.split("_")[1]) for key in eager if key.startswith("queries_"))
        ]
        rows += [
            (
                f"documents ({result['documents']['source']}, {fmt(result['documents']['mean_tokens'], 0)} tokens): tokens/s",
                lambda m: f"{fmt(m['documents']['tokens_per_s'], 0)} ({m['documents']['best']})",
            ),
            (
                f"documents: model FLOP rate / measured {result['matmul_peak']['dtype']} matmul peak "
                f"({fmt(result['matmul_peak']['peak_gflops'] / 1000, 0)} TFLOP/s)",
                lambda m: fmt(m["documents"]["fraction_of_measured_peak"], 3),
            ),
            (
                f"profile, {eager['profile']['queries']} single queries: GPU kernel ms / wall ms per query",
                lambda m: f"{fmt(m['profile']['gpu_kernel_ms_per_query'])} / {fmt(m['profile']['wall_ms_per_query'])}",
            ),
            (
                "profile: kernels / launch calls per query",
                lambda m: (
                    f"{fmt(m['profile']['kernels_per_query'], 0)} / {fmt(m['profile']['launch_calls_per_query'], 0)}"
                ),
            ),
        ]
        for label, show in rows:
            cells = [show(mode) if mode is not None else "-" for mode in [eager, *shown]]
            lines.append(f"| {name} | {label} | {' | '.join(cells)} |")
        captures = [
            ", ".join(f"{k}: {v:.2f}" for k, v in (mode or {}).get("capture_seconds", {}).items()) for mode in shown
        ]
        if any(captures):
            lines.append(f"| {name} | buckets captured (s each) | | {' | '.join(captures)} |")
        if result.get("capture_error"):
            lines.append(f"| {name} | CUDA graph capture failed (ran eagerly) | | {result['capture_error']} |")
        for goal in result["goals"]:
            cells = [f"{fmt(goal['value'], 3)}: **{verdict(goal['met'], result)}**"]
            if third:
                cells.append(
                    f"{fmt(goal['inductor'], 3)}: **{verdict(goal['met_with_inductor'], result)}**"
                    if "inductor" in goal
                    else "-"
                )
            lines.append(f"| {name} | goal: {goal['goal']} | {fmt(goal['eager'], 3)} | {' | '.join(cells)} |")
    return "\n".join(lines)


def verdict(met: bool, result: dict) -> str:
    return "(dry run)" if result["dry_run"] else ("met" if met else "not met")


# What a GPU image (scripts/gpu_image_packages.txt: CPython 3.12, torch, transformers) lacks to
# import the encoder from a checkout (typing-extensions: pydantic wants a recent one); fetched as
# wheels for that Python by ``kit``.
IMAGE_LACKS = ("pydantic", "pydantic-core", "annotated-types", "typing-inspection", "typing-extensions")
TOKENIZER_FILES = (
    "config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "chat_template.jinja",
    "special_tokens_map.json",
)


def build_kit(folder: Path, python_version: str = "3.12") -> dict:
    """A few MiB for ``gpu.sh --goals --kit DIR`` on a GPU machine without a package index: the
    default's tokenizer and config (no weights: the shapes are random) and the wheels the image
    lacks, pinned to the versions installed here. Run where PyPI is reachable."""
    import importlib.metadata
    import shutil
    import subprocess

    from instemb_rag.encoder.backbone import resolve_backbone_folder

    source = resolve_backbone_folder(None)[1]
    (folder / "tokenizer").mkdir(parents=True, exist_ok=True)
    copied = [name for name in TOKENIZER_FILES if (source / name).is_file()]
    for name in copied:
        shutil.copy2(source / name, folder / "tokenizer" / name)
    pins = [f"{name}=={importlib.metadata.version(name)}" for name in IMAGE_LACKS]
    platform = ["--platform", "manylinux2014_x86_64", "--platform", "manylinux_2_17_x86_64"]
    abi = "cp" + python_version.replace(".", "")
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "--dest", str(folder / "wheels"),
         "--python-version", python_version, "--implementation", "cp", "--abi", abi, "--abi", "none", *platform, *pins],
        check=True,
    )  # fmt: skip
    return {"tokenizer": copied, "wheels": sorted(path.name for path in (folder / "wheels").glob("*.whl"))}


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "table":
        print(table([json.loads(Path(name).read_text()) for name in sys.argv[2:]]))
    elif len(sys.argv) == 3 and sys.argv[1] == "kit":
        print(json.dumps(build_kit(Path(sys.argv[2])), indent=2))
    else:
        sys.exit(
            "usage: python benchmarks/bench_gpu_shapes.py table RESULT.json [...]\n"
            "       python benchmarks/bench_gpu_shapes.py kit DIR   # tokenizer + wheels for gpu.sh --goals --kit DIR"
        )
