"""GPU figures: query latency p50/p99, document tokens/s against the GPU's bf16 peak, faiss-gpu search.

    python benchmarks/bench_gpu.py --device cuda [--quick] [--json-out out.json]
    INSTEMB_GPU_DRY_RUN=1 python benchmarks/bench_gpu.py --device cpu --quick --model TINY_DIR
    python benchmarks/bench_gpu.py --smoke      # the same dry run on tests/testing.py's tiny model
    python benchmarks/bench_gpu.py --device cuda --shape default|llama-1b|llama-8b   # issue 57's goals
        (random weights of that shape built on the device, eager vs the CUDA path in one run, the
        profile split; bench_gpu_shapes.py; all three in one command: bash benchmarks/gpu.sh --goals)

Run by benchmarks/gpu.sh (through run.py --device cuda); training examples/s on the GPU come
from bench_training.py in the same run. On a device other than CUDA the script skips, unless
INSTEMB_GPU_DRY_RUN=1: then every measurement runs on the CPU with small sizes (the suite's
check that the script works without a GPU; its figures mean nothing). ``--smoke`` is that dry
run, on the tiny random model of tests/testing.py unless --model (or INSTEMB_BENCH_MODEL) names one.

(a) one query + instruction, batch of one, many repetitions: p50 and p99 latency;
(b) document tokens/s at the best batch size, the model FLOP rate it implies (bench_encoder's
    count), and that rate as a fraction of the bf16 matmul rate measured on the device and of
    the GPU's datasheet dense bf16 peak where the GPU is known;
(c) faiss search of 1,000 random normalised queries over 100,000 vectors of the model's width,
    top-10, exact inner product: GPU index (faiss-gpu) vs the CPU index, queries/s and agreement.
"""

from __future__ import annotations

import os

from bench_common import (
    apply_threads,
    base_parser,
    benchmarked_llm_folder,
    emit,
    interleaved_times,
    machine_info,
    matmul_peak_gflops,
    median,
    percentile,
    smoke_run,
)
from bench_encoder import INSTRUCTION, QUERY, forward_flops, load_documents

# Dense (no sparsity) bf16 tensor-core peaks from the vendors' datasheets, GFLOP/s.
DATASHEET_BF16_GFLOPS = {
    "H100 PCIe": 756_000,
    "H100 NVL": 835_000,
    "H100": 989_000,
    "H200": 989_000,
    "GH200": 989_000,
    "A100": 312_000,
    "L40S": 362_000,
    "L40": 181_000,
    "L4": 121_000,
    "A10G": 70_000,
    "A10": 125_000,
    "RTX 4090": 165_000,
    "B200": 2_250_000,
}


def datasheet_peak(gpu_name: str | None) -> tuple[str | None, float | None]:
    """The longest datasheet key contained in the GPU's name (so 'H100 PCIe' beats 'H100')."""
    if not gpu_name:
        return None, None
    matches = [key for key in DATASHEET_BF16_GFLOPS if key.lower() in gpu_name.lower()]
    if not matches:
        return None, None
    key = max(matches, key=len)
    return key, float(DATASHEET_BF16_GFLOPS[key])


def query_latency(encoder, repeats: int, device: str) -> dict:
    samples = interleaved_times({"q": lambda: encoder.encode_queries([QUERY], [INSTRUCTION])}, repeats, device)["q"]
    return {
        "p50_ms": 1000 * median(samples),
        "p99_ms": 1000 * percentile(samples, 99),
        "repeats": repeats,
        "tokens": len(encoder.build_ids(QUERY, INSTRUCTION)),
    }


def document_throughput(encoder, documents: list[str], batch_sizes: list[int], repeats: int, device: str) -> dict:
    lengths = [len(encoder.build_ids(doc, None)) for doc in documents]
    tokens, flops = sum(lengths), sum(forward_flops(encoder, n) for n in lengths)
    runs = {
        f"batch_{size}": (lambda size=size: encoder.encode_documents(documents, batch_size=size))
        for size in batch_sizes
    }
    samples = interleaved_times(runs, repeats, device)
    best = min(samples, key=lambda name: min(samples[name]))
    seconds = min(samples[best])
    return {
        "documents": len(documents),
        "tokens": tokens,
        "mean_tokens_per_doc": tokens / len(documents),
        "best_batch": best,
        "tokens_per_s": tokens / seconds,
        "model_gflops": flops / seconds / 1e9,
        "by_batch_tokens_per_s": {name: tokens / median(times) for name, times in samples.items()},
    }


def faiss_search(dimension: int, vectors: int, queries: int, device: str) -> dict:
    import time

    import faiss
    import numpy as np

    from instemb_rag.index.stores import faiss_gpu as accel

    rng = np.random.default_rng(0)
    base = rng.standard_normal((vectors, dimension), dtype=np.float32)
    base /= np.linalg.norm(base, axis=1, keepdims=True)
    probe = rng.standard_normal((queries, dimension), dtype=np.float32)
    probe /= np.linalg.norm(probe, axis=1, keepdims=True)
    cpu = faiss.IndexFlatIP(dimension)
    cpu.add(base)
    result = {"vectors": vectors, "queries": queries, "k": 10}

    def timed(index) -> tuple[float, np.ndarray]:
        index.search(probe[:8], 10)  # warm-up
        started = time.perf_counter()
        _, ids = index.search(probe, 10)
        return time.perf_counter() - started, ids

    cpu_s, cpu_ids = timed(cpu)
    result["cpu_queries_per_s"] = queries / cpu_s
    if device.startswith("cuda") and accel.faiss_gpu_available():
        gpu_s, gpu_ids = timed(accel.to_gpu_index(cpu))
        result["gpu_queries_per_s"] = queries / gpu_s
        result["gpu_speedup"] = cpu_s / gpu_s
        result["top10_agreement"] = float(np.mean([len(set(a) & set(b)) / 10 for a, b in zip(cpu_ids, gpu_ids)]))
    else:
        result["gpu"] = f"faiss has no GPU support here ({accel.GPU_EXTRA_HINT})"
    return result


def main(argv: list[str] | None = None) -> dict:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument(
        "--model",
        default=os.environ.get("INSTEMB_BENCH_MODEL") or None,
        help="LLM folder or HF folder (default: the shipped LLM; a two-space folder: its documents' LLM; env "
        "INSTEMB_BENCH_MODEL)",
    )
    parser.add_argument(
        "--shape",
        choices=["default", "llama-1b", "llama-8b"],
        default=None,
        help="issue 57's goals on random weights of this shape, eager vs the CUDA path (bench_gpu_shapes.py)",
    )
    parser.add_argument(
        "--tokenizer",
        default=os.environ.get("INSTEMB_BENCH_TOKENIZER") or None,
        help="with --shape: a folder with the tokenizer (and the default shape's config.json); default --model, "
        "else the shipped default's converted folder (env INSTEMB_BENCH_TOKENIZER)",
    )
    parser.add_argument(
        "--inductor",
        action="store_true",
        help="with --shape: also the CUDA path over decoder blocks compiled by torch.compile (measured last)",
    )
    args = parser.parse_args(argv)
    dry_run = os.environ.get("INSTEMB_GPU_DRY_RUN") == "1" or args.smoke
    if not args.device.startswith("cuda") and not dry_run:
        return emit({"benchmark": "gpu", "skipped": "needs --device cuda (benchmarks/gpu.sh)"}, args.json_out)
    with smoke_run(args):
        if args.shape:
            from bench_gpu_shapes import measure_shape

            return emit(measure_shape(args, dry_run), args.json_out)
        result = measure(args, dry_run)
    return emit(result, args.json_out)


def measure(args, dry_run: bool) -> dict:
    threads = apply_threads(args.threads)
    import torch

    from instemb_rag import InstEmbEncoder

    encoder = InstEmbEncoder.from_pretrained(benchmarked_llm_folder(args.model), device=args.device)
    device = str(encoder.device)
    small = args.quick or dry_run
    documents, source = load_documents(8 if dry_run else (64 if args.quick else 256))
    machine = machine_info(device)
    peak = matmul_peak_gflops(
        device,
        quick=small,
        dtype=torch.bfloat16 if device.startswith("cuda") else None,
        sizes=(256,) if dry_run else None,
    )
    throughput = document_throughput(encoder, documents, [8] if dry_run else [16, 64, 128], 2 if small else 5, device)
    throughput["fraction_of_measured_peak"] = throughput["model_gflops"] / peak["peak_gflops"]
    key, sheet = datasheet_peak(machine.get("gpu"))
    throughput["datasheet_peak"] = {
        "gpu": key,
        "bf16_gflops": sheet,
        "fraction": throughput["model_gflops"] / sheet if sheet else None,
    }
    return {
        "benchmark": "gpu",
        "dry_run": dry_run,
        "smoke": args.smoke,
        "machine": machine,
        "threads": threads,
        "quick": args.quick,
        "dtype": str(encoder.model.dtype).replace("torch.", ""),
        "documents_source": source,
        "query_latency": query_latency(encoder, 10 if dry_run else (100 if args.quick else 300), device),
        "document_throughput": throughput,
        "matmul_peak": {"dtype": "bf16" if device.startswith("cuda") else "fp32", **peak},
        "faiss": faiss_search(encoder.dimension, 2_000 if dry_run else 100_000, 50 if dry_run else 1_000, device),
    }


if __name__ == "__main__":
    main()
