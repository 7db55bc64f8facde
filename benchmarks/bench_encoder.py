"""Encoder speed: query latency, document throughput against the matmul peak, DAAP cost.

    python benchmarks/bench_encoder.py [--quick] [--json-out out.json] [--device cpu]

(a) p50 latency of one query + instruction (encode_queries, batch of one);
(b) document throughput in tokens/s, and the model FLOP rate it implies as a fraction of the
    best fp32 torch.matmul rate measured in the same run (bracketing peak), and paired per
    repetition with a 1024^3 GEMM burst timed just before (robust on a shared machine);
(c) DAAP with L = 8 against plain last-token pooling (L = 0) of the same text, timed in
    alternation so load from other processes hits both alike;
(d) on the CPU, precision="int8" (instemb_rag/encoder/quantize.py) against fp32: one query and the
    documents, the two encoders timed in alternation, and the cosine of their embeddings; the
    int8 load time with the layer plan calibrated and cached, the layer counts, and the CPU flags
    that chose the int8 kernel. ``--only-int8`` runs (d) alone.

``--smoke`` runs (a)-(d) in seconds on the tiny random model of tests/testing.py (4 documents, 2
repeats, small GEMMs): the suite's check that the script still runs; its figures mean nothing.

``--emulate-avx2`` runs the whole benchmark again in a process whose fbgemm, ATen, MKL and oneDNN
kernels are limited to AVX2 (their own switches; INSTEMB_CPU_FLAGS=avx2,fma for instemb_rag):
the int8 and float kernels of a CPU without AVX512-VNNI, on this machine. The kernels are
those of an AVX2 CPU, its clock, caches and memory are not: only the int8 / fp32 ratio and the
layer plan carry over, not the absolute times.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from bench_common import (
    SHARED_DATA,
    apply_threads,
    base_parser,
    benchmarked_llm_folder,
    emit,
    gemm_probe,
    interleaved_times,
    machine_info,
    matmul_peak_gflops,
    median,
    percentile,
    smoke_run,
)

QUERY = "what is the packed size and weight of the tent"
INSTRUCTION = "Focus on the durability of the product in wind and rain."
# The kernel switches of fbgemm, ATen, MKL and oneDNN that limit them to AVX2, and the flags
# instemb_rag then sees (cpu_flags.FLAGS_ENV).
AVX2_ENVIRONMENT = {
    "FBGEMM_ENABLE_INSTRUCTIONS": "AVX2",
    "ATEN_CPU_CAPABILITY": "avx2",
    "MKL_ENABLE_INSTRUCTIONS": "AVX2",
    "ONEDNN_MAX_CPU_ISA": "AVX2",
    "INSTEMB_CPU_FLAGS": "avx2,fma",
}
FALLBACK_DOC = (
    "The two-person tent weighs 1.9 kg and packs to 45 by 15 cm. Its aluminium poles held up "
    "in strong wind during a three-night trip, and the nylon floor stayed dry in heavy rain. "
    "The zipper on the door snagged twice; the seams were taped well. "
)


def load_documents(count: int) -> tuple[list[str], str]:
    corpus = SHARED_DATA / "scifact" / "corpus.jsonl"
    if not corpus.is_file():
        print(f"note: {corpus} is absent; timing a repeated product review instead")
        return [FALLBACK_DOC * (2 + i % 3) for i in range(count)], "synthetic product reviews"
    from instemb_rag.jsonl import read_jsonl_objects

    documents = [f"{row.get('title', '')}\n{row['text']}" for row in read_jsonl_objects(corpus, count)]
    return documents, f"first {count} SciFact abstracts"


def forward_flops(encoder, length: int) -> float:
    """Useful FLOPs of one sequence: 2 x non-embedding params per token + causal attention
    (QK^T and AV, 2 FLOPs per multiply-add, each token attending to itself and earlier ones)."""
    config = encoder.model.config
    embedding = encoder.model.get_input_embeddings().weight.numel()
    non_embedding = sum(p.numel() for p in encoder.model.base_model.parameters()) - embedding
    # An int8 encoder's linear layers hold packed weights, not parameters (encoder/quantize.py's
    # Int8Linear): their products count as the fp32 layers' would, the same useful work.
    non_embedding += sum(
        module.in_features * module.out_features
        for module in encoder.model.base_model.modules()
        if hasattr(module, "_packed")
    )
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    attention_width = config.num_attention_heads * head_dim
    attention = 2 * 2 * config.num_hidden_layers * attention_width * length * (length + 1) / 2
    return 2 * non_embedding * length + attention


def query_latency(encoder, repeats: int, device: str) -> dict:
    samples = interleaved_times({"q": lambda: encoder.encode_queries([QUERY], [INSTRUCTION])}, repeats, device)["q"]
    tokens = len(encoder.build_ids(QUERY, INSTRUCTION))
    return {
        "p50_ms": 1000 * median(samples),
        "p90_ms": 1000 * percentile(samples, 90),
        "tokens": tokens,
        "repeats": repeats,
    }


def document_throughput(
    encoder, documents: list[str], batch_sizes: list[int], repeats: int, device: str, probe_size: int = 1024
) -> dict:
    lengths = [len(encoder.build_ids(doc, None)) for doc in documents]
    tokens = sum(lengths)
    flops = sum(forward_flops(encoder, n) for n in lengths)
    probe, probe_flops = gemm_probe(device, probe_size)
    runs = {"gemm_probe": probe}
    runs.update(
        {
            f"batch_{size}": (lambda size=size: encoder.encode_documents(documents, batch_size=size))
            for size in batch_sizes
        }
    )
    samples = interleaved_times(runs, repeats, device)
    probe_times = samples.pop("gemm_probe")
    by_batch = {
        name: {"median_tokens_per_s": tokens / median(times), "best_tokens_per_s": tokens / min(times)}
        for name, times in samples.items()
    }
    best_name = max(by_batch, key=lambda name: by_batch[name]["best_tokens_per_s"])
    best_seconds = min(samples[best_name])
    # Per repetition: model FLOP rate / GEMM rate measured just before it (same contention).
    paired = [(flops / model_s) / (probe_flops / probe_s) for model_s, probe_s in zip(samples[best_name], probe_times)]
    return {
        "documents": len(documents),
        "tokens": tokens,
        "mean_tokens_per_doc": tokens / len(documents),
        "gflop": flops / 1e9,
        "by_batch_size": by_batch,
        "best_batch": best_name,
        "tokens_per_s": tokens / best_seconds,
        "model_gflops": flops / best_seconds / 1e9,
        "paired_fraction_of_gemm_median": median(paired),
        "paired_fraction_of_gemm_best": max(paired),
        "gemm_probe_gflops_median": probe_flops / median(probe_times) / 1e9,
    }


def daap_cost(encoder, documents: list[str], repeats: int, device: str) -> dict:
    """Same texts, same encoder, L = 8 DAAP vs L = 0 (which pools the last input token)."""

    def with_length(length: int, work):
        view = encoder.with_options(lookahead_length=length)  # shares the weights: nothing is loaded
        return lambda: work(view)

    query = lambda view: view.encode_queries([QUERY], [INSTRUCTION])  # noqa: E731
    docs = lambda view: view.encode_documents(documents, batch_size=16)  # noqa: E731
    lookahead = min(8, encoder.lookahead.length)
    query_times = interleaved_times(
        {"daap": with_length(lookahead, query), "last": with_length(0, query)}, repeats * 3, device
    )
    doc_times = interleaved_times({"daap": with_length(lookahead, docs), "last": with_length(0, docs)}, repeats, device)
    return {
        "lookahead_length": lookahead,
        "query_ratio": median(query_times["daap"]) / median(query_times["last"]),
        "documents_ratio": median(doc_times["daap"]) / median(doc_times["last"]),
        "query_ms": {name: 1000 * median(times) for name, times in query_times.items()},
        "documents_s": {name: median(times) for name, times in doc_times.items()},
    }


def int8_loads(model: str | None, device: str) -> dict:
    """The int8 encoder, loaded twice: with its layer plan calibrated (the plan file is removed
    first), then from the cached plan; the seconds of each whole load."""
    import time

    from instemb_rag import InstEmbEncoder

    seconds = {}
    for attempt in ("calibrated", "cached"):
        started = time.perf_counter()
        low = InstEmbEncoder.from_pretrained(model, device=device, precision="int8")
        report = low.quantization_report
        if attempt == "calibrated" and report["plan"] == "cached":  # an earlier run's plan: decide afresh
            Path(report["plan_file"]).unlink()
            started = time.perf_counter()
            low = InstEmbEncoder.from_pretrained(model, device=device, precision="int8")
            report = low.quantization_report
        seconds[f"{attempt}_s"] = time.perf_counter() - started
        seconds[f"{attempt}_plan_s"] = report["quantize_seconds"]
    return {**seconds, "encoder": low}


def cpu_info() -> dict:
    """The CPU flags that choose the int8 kernel, and any kernel limits in force."""
    from instemb_rag.encoder.cpu_flags import RELEVANT_FLAGS, cpu_kind, read_cpu_flags

    limits = {name: os.environ[name] for name in AVX2_ENVIRONMENT if name in os.environ}
    hardware = sorted(flag for flag in read_cpu_flags(overridable=False) if flag in RELEVANT_FLAGS)
    return {**cpu_kind(), "hardware_flags": hardware, "kernel_limits": limits, "emulated": "AVX2" if limits else None}


def int8_vs_fp32(encoder, documents: list[str], repeats: int, device: str, model: str | None) -> dict:
    """Same texts, fp32 encoder vs an int8 one of the same model, timed in alternation."""
    import time

    loads = int8_loads(model, device)
    low = loads.pop("encoder")
    encoders = {"fp32": encoder, "int8": low}
    cpu_seconds: dict[str, list[float]] = {"fp32_documents": [], "int8_documents": []}

    def timed_cpu(name, work):  # process CPU time as well: on a loaded machine it drifts less than wall time
        def run():
            started_cpu = time.process_time()
            work()
            cpu_seconds[name].append(time.process_time() - started_cpu)

        return run

    query_times = interleaved_times(
        {name: (lambda e=e: e.encode_queries([QUERY], [INSTRUCTION])) for name, e in encoders.items()},
        repeats * 3,
        device,
    )
    doc_times = interleaved_times(
        {
            name: timed_cpu(f"{name}_documents", lambda e=e: e.encode_documents(documents, batch_size=8))
            for name, e in encoders.items()
        },
        repeats,
        device,
    )
    cosines = (encoder.encode_documents(documents) * low.encode_documents(documents)).sum(axis=1)
    query_cosine = float(
        encoder.encode_queries([QUERY], [INSTRUCTION])[0] @ low.encode_queries([QUERY], [INSTRUCTION])[0]
    )
    tokens = sum(len(encoder.build_ids(doc, None)) for doc in documents)
    return {
        "query_speedup": median(query_times["fp32"]) / median(query_times["int8"]),
        "documents_speedup": median(doc_times["fp32"]) / median(doc_times["int8"]),
        "query_ms": {name: 1000 * median(times) for name, times in query_times.items()},
        "documents_tokens_per_s": {name: tokens / median(times) for name, times in doc_times.items()},
        "cosine_documents_min": float(cosines.min()),
        "cosine_documents_mean": float(cosines.mean()),
        "cosine_query": query_cosine,
        "documents_speedup_cpu_time": median(cpu_seconds["fp32_documents"][1:])
        / median(cpu_seconds["int8_documents"][1:]),
        "int8_build_s": loads["calibrated_s"],  # load + calibration + quantization, as before plans were cached
        "int8_load_s": loads,
        "quantization_report": getattr(low, "quantization_report", None),
        "documents": len(documents),
        "repeats": repeats,
    }


def main(argv: list[str] | None = None) -> dict:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument(
        "--model",
        default=None,
        help="LLM folder or HF folder (default: the shipped LLM; a two-space folder: its documents' LLM)",
    )
    parser.add_argument("--only-int8", action="store_true", help="only (d): int8 against fp32")
    parser.add_argument(
        "--emulate-avx2", action="store_true", help="run with the kernels of a CPU without AVX512-VNNI (AVX2)"
    )
    args = parser.parse_args(argv)
    if args.emulate_avx2 and os.environ.get("FBGEMM_ENABLE_INSTRUCTIONS") != "AVX2":
        # The kernel libraries read their switches once, when loaded: start afresh with them set.
        arguments = [sys.executable, str(Path(__file__).resolve()), *(sys.argv[1:] if argv is None else argv)]
        os.execve(sys.executable, arguments, {**os.environ, **AVX2_ENVIRONMENT})
    with smoke_run(args):
        result = measure(args)
    return emit(result, args.json_out)


def measure(args) -> dict:
    threads = apply_threads(args.threads)
    from instemb_rag import InstEmbEncoder

    args.model = benchmarked_llm_folder(args.model)  # the LLM's figures, whichever layout the default has
    encoder = InstEmbEncoder.from_pretrained(args.model, device=args.device)
    device = str(encoder.device)
    smoke = args.smoke
    documents, source = load_documents(4 if smoke else 8 if args.quick else 48)
    repeats = 2 if smoke else 3 if args.quick else 7
    batch_sizes = [4] if smoke else [8] if args.quick else [1, 4, 16, 48]
    int8 = (lambda: int8_vs_fp32(encoder, documents[:8], repeats, device, args.model)) if device == "cpu" else None
    # What every result of this script records about the run (the int8-only one and the full one).
    run = {
        "machine": machine_info(device),
        "cpu_flags": cpu_info(),
        "threads": threads,
        "quick": args.quick,
        "smoke": smoke,
        "documents_source": source,
    }
    if args.only_int8:
        return {
            "benchmark": "encoder_int8",
            **run,
            "int8_vs_fp32": int8() if int8 else {"skipped": "int8 runs on the CPU only"},
        }

    sizes = (128, 256) if smoke else None
    peak_before = matmul_peak_gflops(device, quick=args.quick or smoke, sizes=sizes)
    throughput = document_throughput(encoder, documents, batch_sizes, repeats, device, 256 if smoke else 1024)
    peak_after = matmul_peak_gflops(device, quick=args.quick or smoke, sizes=sizes)
    # The machine is shared: take the better of two peak measurements bracketing the run.
    peak = max(peak_before["peak_gflops"], peak_after["peak_gflops"])
    throughput["fraction_of_matmul_peak"] = throughput["model_gflops"] / peak
    result = {
        "benchmark": "encoder",
        **run,
        "query_latency": query_latency(encoder, 3 if smoke else 10 if args.quick else 30, device),
        "document_throughput": throughput,
        "matmul_peak": {"peak_gflops": peak, "before": peak_before, "after": peak_after},
        "daap_vs_last_token": daap_cost(
            encoder, documents[:2] if smoke else documents[:4] if args.quick else documents[:16], repeats, device
        ),
    }
    if int8:
        result["int8_vs_fp32"] = int8()
    return result


if __name__ == "__main__":
    main()
