"""The rows each benchmark's figures make in the README table: one renderer per script
(``RENDERERS``, keyed as run.py's ``SCRIPTS``), and ``rows_for``, which says in the table when a
script was missing, failed, was skipped or wrote a result its renderer cannot read.

Each row is (figure, value, goal, met). Split out of run.py, which runs the scripts and writes
the table (``run.rows_for`` and ``run.gpu_rows`` are these).
"""

from __future__ import annotations


def fmt(value, digits: int = 2) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return str(value)


def verdict(value: float | None, goal: float, higher_is_better: bool) -> str:
    if value is None:
        return ""
    met = value >= goal if higher_is_better else value <= goal
    return "yes" if met else "**no**"


def encoder_rows(result: dict) -> list[tuple]:
    latency, docs = result["query_latency"], result["document_throughput"]
    daap, peak = result["daap_vs_last_token"], result["matmul_peak"]["peak_gflops"]
    fraction = docs["fraction_of_matmul_peak"]
    paired = docs.get("paired_fraction_of_gemm_median")
    return [
        ("Query + instruction latency, p50", f"{fmt(latency['p50_ms'], 1)} ms ({latency['tokens']} tokens)", "", ""),
        (
            "Document throughput",
            f"{fmt(docs['tokens_per_s'], 0)} tokens/s ({docs['best_batch'].replace('_', ' ')}, "
            f"{fmt(docs['mean_tokens_per_doc'], 0)} tokens/doc)",
            "",
            "",
        ),
        (
            "Model FLOP rate / best fp32 matmul rate",
            f"{fmt(docs['model_gflops'], 1)} / {fmt(peak, 1)} GFLOP/s = {fmt(fraction)}",
            ">= 0.70",
            verdict(fraction, 0.7, True),
        ),
        ("Same, paired per repetition with a GEMM burst (median)", fmt(paired), ">= 0.70", verdict(paired, 0.7, True)),
        (
            f"DAAP L={daap['lookahead_length']} / last token L=0, one query",
            f"{fmt(daap['query_ratio'])}x",
            "<= 1.25x",
            verdict(daap["query_ratio"], 1.25, False),
        ),
        (
            f"DAAP L={daap['lookahead_length']} / last token L=0, documents",
            f"{fmt(daap['documents_ratio'])}x",
            "<= 1.25x",
            verdict(daap["documents_ratio"], 1.25, False),
        ),
    ] + int8_rows(result)


def int8_rows(result: dict) -> list[tuple]:
    low = result.get("int8_vs_fp32")
    if not low or "skipped" in low:
        return []
    return [
        (
            "precision=int8 speed-up over fp32, one query",
            f"{fmt(low['query_speedup'])}x ({fmt(low['query_ms']['int8'], 1)} vs {fmt(low['query_ms']['fp32'], 1)} ms)",
            "",
            "",
        ),
        (
            "precision=int8 speed-up over fp32, documents (batch 8)",
            f"{fmt(low['documents_speedup'])}x "
            f"({fmt(low['documents_tokens_per_s']['int8'], 0)} vs {fmt(low['documents_tokens_per_s']['fp32'], 0)} tokens/s"
            + (f"; CPU time {fmt(low['documents_speedup_cpu_time'])}x" if "documents_speedup_cpu_time" in low else "")
            + ")",
            "",
            "",
        ),
        (
            "precision=int8 cosine to fp32 (documents min / mean, query)",
            f"{fmt(low['cosine_documents_min'], 4)} / {fmt(low['cosine_documents_mean'], 4)}, {fmt(low['cosine_query'], 4)}",
            ">= 0.99",
            verdict(min(low["cosine_documents_min"], low["cosine_query"]), 0.99, True),
        ),
    ]


def multi_rows(result: dict) -> list[tuple]:
    k, tokens = result["k"], result["tokens"]
    ratio, floor = result["ratio_shared_k_vs_k1"], result["token_ratio_shared_vs_k1"]
    return [
        (
            f"K={k} instructions, shared prefix / K=1 (text {tokens['text']}, instr. ~{max(tokens['instruction'])} tokens)",
            f"{fmt(ratio)}x (tokens run: {fmt(floor)}x)",
            f"<= 2.50x (token floor {fmt(floor)}x)",
            verdict(ratio, 2.5, False),
        ),
        (
            "Same, against its token floor (time ratio / tokens-run ratio)",
            f"{fmt(ratio / floor)}x",
            "<= 1.00x",
            verdict(ratio / floor, 1.0, False),
        ),
        (f"K={k} instructions, plain batch / K=1", f"{fmt(result['ratio_plain_k_vs_k1'])}x", "", ""),
        ("Shared prefix speed-up over plain batch", f"{fmt(result['speedup_shared_vs_plain'])}x", "", ""),
    ]


def generate_rows(result: dict) -> list[tuple]:
    return [
        (
            f"Generate-then-embed ({result['new_tokens']} greedy tokens) / InstEmb, one query",
            f"{fmt(result['ratio_generate_vs_instemb'], 1)}x ({fmt(result['ms']['generate_then_embed'], 0)} vs "
            f"{fmt(result['ms']['instemb'], 0)} ms)",
            "",
            "",
        ),
    ]


def generic_rows(name: str, result: dict, limit: int = 10) -> list[tuple]:
    """Other engineers' scripts: their numeric figures, flattened (machine info left out)."""
    rows = []

    def walk(prefix: str, value) -> None:
        if isinstance(value, dict):
            for key, inner in value.items():
                if key not in {"machine", "threads", "quick", "benchmark"}:
                    walk(f"{prefix}.{key}" if prefix else key, inner)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            rows.append((f"{name}: {prefix}", fmt(float(value)), "", ""))

    walk("", result)
    return rows[:limit]


def index_rows(result: dict) -> list[tuple]:
    corpus, latency, hnsw = result["corpus"], result["query_latency_ms"], result["hnsw"]
    names = {
        "faiss_flat": "FAISS exact",
        "faiss_hnsw": "FAISS HNSW",
        "qdrant_embedded": "Qdrant embedded (edge)",
        "encode_only": "query encoding alone",
    }
    rows = [
        (
            f"Indexing, Vaswani {corpus['documents']:,} of {corpus['of']:,} abstracts ({corpus['chunks']:,} chunks)",
            f"{fmt(result['indexing']['chunks_per_s'])} chunks/s",
            "",
            "",
        )
    ]
    rows += [
        (
            f"Query latency end to end, {names.get(name, name)} (top-10)",
            f"p50 {fmt(value['p50'], 1)} ms, p95 {fmt(value['p95'], 1)} ms",
            "",
            "",
        )
        for name, value in latency.items()
    ]
    rows.append(
        (
            f"HNSW recall@10 vs exact (M={hnsw['M']}, efSearch={hnsw['ef_search']}, {hnsw['queries']} queries)",
            fmt(hnsw["recall_at_10"], 3),
            "",
            "",
        )
    )
    return rows


def gpu_rows(result: dict) -> list[tuple]:
    latency, docs, search = result["query_latency"], result["document_throughput"], result["faiss"]
    dtype = result.get("dtype", "bf16")
    sheet = docs["datasheet_peak"]
    against = (
        f"{fmt(docs['model_gflops'] / 1000, 1)} TFLOP/s = {fmt(docs['fraction_of_measured_peak'])} of the measured "
        f"{result['matmul_peak']['dtype']} matmul peak ({fmt(result['matmul_peak']['peak_gflops'] / 1000, 1)} TFLOP/s)"
    )
    if sheet.get("fraction") is not None:
        against += f", {fmt(sheet['fraction'], 3)} of the {sheet['gpu']} datasheet bf16 peak ({fmt(sheet['bf16_gflops'] / 1000, 0)} TFLOP/s)"
    if "gpu_queries_per_s" in search:
        faiss_value = (
            f"{fmt(search['gpu_queries_per_s'], 0)} queries/s on the GPU vs {fmt(search['cpu_queries_per_s'], 0)} "
            f"on the CPU ({fmt(search['gpu_speedup'], 1)}x; top-10 agreement {fmt(search['top10_agreement'], 3)})"
        )
    else:
        faiss_value = (
            f"{fmt(search['cpu_queries_per_s'], 0)} queries/s on the CPU; {search.get('gpu', 'no GPU figure')}"
        )
    prefix = "DRY RUN (CPU, tiny sizes): " if result.get("dry_run") else ""
    return [
        (
            f"{prefix}Query + instruction latency, {dtype}, batch 1 ({latency['repeats']} runs)",
            f"p50 {fmt(latency['p50_ms'], 1)} ms, p99 {fmt(latency['p99_ms'], 1)} ms ({latency['tokens']} tokens)",
            "",
            "",
        ),
        (
            f"{prefix}Document throughput, {dtype} ({docs['best_batch'].replace('_', ' ')}, "
            f"{fmt(docs['mean_tokens_per_doc'], 0)} tokens/doc)",
            f"{fmt(docs['tokens_per_s'], 0)} tokens/s; {against}",
            "",
            "",
        ),
        (
            f"{prefix}FAISS exact search, {search['vectors']:,} vectors, {search['queries']:,} queries, top-{search['k']}",
            faiss_value,
            "",
            "",
        ),
    ]


def training_label(mode: str, k: int) -> str:
    """bench_training.py's mode names, as the table says them."""
    if mode.startswith("prefix_k"):
        return f"frozen prefix K={mode[len('prefix_k') :]}, frozen LLM run each step"
    return {
        "full": "full pass (recipe as is), frozen LLM run each step",
        "llm_target_cache": "full pass, LLM targets cached",
        "lookahead_frozen": "full pass, LLM targets cached, look-ahead frozen",
        "all": f"frozen prefix K={k} + LLM-target cache + length buckets",
        "query_tower": f"query-tower step (instruction + query only), frozen prefix K={k}",
    }.get(mode, mode)


def training_rows(result: dict) -> list[tuple]:
    if "speedup_over_full" not in result:
        return generic_rows("training", result)
    k, goal, goal_mode = result["recipe_trainable_top_layers"], result["goal_speedup_over_full"], result["goal_mode"]
    rows = []
    for mode, r in result["results"].items():
        speedup = result["speedup_over_full"][mode]
        rows.append(
            (
                f"Training, {training_label(mode, k)}: examples/s, input tokens/s",
                f"{fmt(r['examples_per_s'], 3)}, {fmt(r['input_tokens_per_s'], 1)} (batch {result['batch_size']}; "
                f"{fmt(speedup)}x the full pass; padding {r['padding_fraction']:.0%})",
                f">= {fmt(goal, 0)}x the full pass" if mode == goal_mode else "",
                verdict(speedup, goal, True) if mode == goal_mode else "",
            )
        )
    prefix = result["prefix_cache"][f"k{k}"]
    rows.append(
        (
            "Training caches per 10k examples: frozen-prefix states (float16), LLM targets",
            f"{prefix['bytes_per_10k_examples'] / 1e9:,.2f} GB, "
            f"{result['llm_target_cache_bytes_per_10k_examples'] / 1e6:,.0f} MB "
            f"(built once: {prefix['seconds_per_example']} s/example, "
            f"LLM targets {result['llm_target_cache_seconds_per_example']} s/example)",
            "",
            "",
        )
    )
    return rows


def serve_rows(result: dict) -> list[tuple]:
    """One row per client count: dynamic batching vs --no-batching, same requests, taking turns."""
    on, off = result["modes"]["batching"]["levels"], result["modes"]["no_batching"]["levels"]
    threads = result.get("server_threads", "torch default")
    load = result.get("load_average_before")
    note = f"server threads {threads}" + (
        f", load avg {load} on {result.get('cores', '?')} cores before" if load is not None else ""
    )
    rows = []
    for clients in on:
        a, b = on[clients], off[clients]
        rows.append(
            (
                f"Serve /v1/embeddings (1 query + instruction), {clients} concurrent client{'s' if clients != '1' else ''}: "
                f"batching / none ({note})",
                f"{fmt(a['requests_per_s'])} / {fmt(b['requests_per_s'])} req/s; p50 {fmt(a['p50_ms'], 0)} / "
                f"{fmt(b['p50_ms'], 0)} ms; p99 {fmt(a['p99_ms'], 0)} / {fmt(b['p99_ms'], 0)} ms; "
                f"mean batch {fmt(a['mean_batch'], 1)} ({a['requests']} requests each)",
                "",
                "",
            )
        )
    return rows


def client_cpu_rows(warm: dict, cold: dict, no_daemon: dict) -> list[tuple]:
    """The CPU time of the command's own process beside its wall time (results from before it was
    measured have none)."""
    if "client_cpu_p50_s" not in warm:
        return []
    return [
        (
            "`instemb-rag query`: the client process's own CPU (user + system), p50 warm / cold / --no-daemon",
            f"{fmt(warm['client_cpu_p50_s'])} / {fmt(cold['client_cpu_p50_s'])} / "
            f"{fmt(no_daemon['client_cpu_p50_s'])} s",
            "warm <= 0.12 s",
            verdict(warm["client_cpu_p50_s"], 0.12, higher_is_better=False),
        )
    ]


def typer_app_rows(result: dict) -> list[tuple]:
    """The same warm queries through the typer app (the path before the lean client; results from
    before it have none)."""
    typer_app = result.get("warm_typer_app")
    if typer_app is None:
        return []
    return [
        (
            "`instemb-rag query`, warm, through the typer app (INSTEMB_FULL_CLI=1): wall p50 / client CPU p50",
            f"{fmt(typer_app['p50_s'])} / {fmt(typer_app['client_cpu_p50_s'])} s",
            "",
            "",
        )
    ]


def cli_rows(result: dict) -> list[tuple]:
    """`instemb-rag query` end to end (issue 60's goals), the in-process search, and whether the
    paths agree."""
    warm, cold, no_daemon, inner = (
        result["warm"],
        result["cold_resident"],
        result["cold_no_daemon"],
        result["in_process"],
    )
    load = f"load avg {fmt(result['load_average_before'], 1)} on {result['cores']} cores before"
    rows = [
        (
            f"`instemb-rag query`, warm (resident process up), p50 / p90 over {warm['runs']} instructions ({load})",
            f"{fmt(warm['p50_s'])} / {fmt(warm['p90_s'])} s",
            "p50 <= 0.30 s",
            verdict(warm["p50_s"], 0.30, higher_is_better=False),
        ),
        (
            f"`instemb-rag query`, cold (nothing resident; it starts the process), p50 / p90 over {cold['runs']} runs",
            f"{fmt(cold['p50_s'])} / {fmt(cold['p90_s'])} s",
            "<= 5 s",
            verdict(cold["p50_s"], 5.0, higher_is_better=False),
        ),
        (
            f"`instemb-rag query --no-daemon` (all in the command's process), p50 / p90 over {no_daemon['runs']} runs",
            f"{fmt(no_daemon['p50_s'])} / {fmt(no_daemon['p90_s'])} s",
            "",
            "",
        ),
        *client_cpu_rows(warm, cold, no_daemon),
        *typer_app_rows(result),
        (
            "In-process `Index.search` under an instruction / the encoder's query alone (median ms)",
            f"{fmt(inner['search_over_encoder'])}x ({fmt(inner['median_ms']['index_search'], 1)} / "
            f"{fmt(inner['median_ms']['encoder_query'], 1)} ms)",
            "<= 1.2x",
            verdict(inner["search_over_encoder"], 1.2, higher_is_better=False),
        ),
    ]
    if "composed_over_plain_llm" in inner:
        rows.append(
            (
                "The model's query / one plain query of its LLM, same text and instruction (median ms)",
                f"{fmt(inner['composed_over_plain_llm'])}x ({fmt(inner['median_ms']['encoder_query'], 1)} / "
                f"{fmt(inner['median_ms']['plain_llm_query'], 1)} ms)",
                "<= 1.3x",
                verdict(inner["composed_over_plain_llm"], 1.3, higher_is_better=False),
            )
        )
    rows.append(
        (
            "Same hits and scores: warm query (lean client and typer app), --no-daemon query, Index.search",
            "yes" if result["identical_answers"] else "**no**",
            "identical",
            "yes" if result["identical_answers"] else "**no**",
        )
    )
    return rows


def ray_rows(result: dict) -> list[tuple]:
    """index --ray on a local runtime: end to end (Ray start-up and actor loading included) next to
    the single-process path, the bursty commit rate 2 vs 1 actors, and the driver's ceiling."""
    runs = {"single_process": "one process", "ray_1_worker": "Ray, 1 actor", "ray_2_workers": "Ray, 2 actors"}
    ceiling = result["driver_ceiling"]
    return [
        (
            f"index --ray, {result['abstracts']} Vaswani abstracts, end to end: "
            + " / ".join(runs.values())
            + f" (load avg {fmt(result['load_average_before'][0], 1)} before)",
            " / ".join(f"{fmt(result[name]['end_to_end_chunks_per_s'])}" for name in runs) + " chunks/s",
            "",
            "",
        ),
        (
            "index --ray, commit rate after the first commit, 2 actors / 1 actor (bursty: see docs/scale-out.md)",
            f"{fmt(result['two_over_one_worker'])}x ({fmt(result['ray_2_workers']['chunks_per_s'])} vs "
            f"{fmt(result['ray_1_worker']['chunks_per_s'])} chunks/s)",
            "",
            "",
        ),
        (
            f"index --ray driver commit ceiling ({ceiling['chunks_per_file']}-chunk files, vectors given)",
            f"{fmt(ceiling['chunks_per_s'], 0)} chunks/s",
            "",
            "",
        ),
    ]


def hybrid_rows(result: dict) -> list[tuple]:
    """Fused query latency against dense alone (the issue's goal: p50 within 1.2x) and the
    full-text index's share of commit throughput."""
    latency, ratio = result["query_latency_ms"], result["fused_over_dense_p50"]
    rows = [
        (
            f"Hybrid query ({mode}), end to end p50 / p95 vs dense ({result['corpus']['chunks']} chunks)",
            f"{fmt(latency[mode]['p50'], 1)} / {fmt(latency[mode]['p95'], 1)} ms vs {fmt(latency['dense']['p50'], 1)} ms "
            f"({fmt(ratio[mode])}x)",
            "p50 <= 1.2x dense",
            verdict(ratio[mode], 1.2, False),
        )
        for mode in ratio
    ]
    commits = result["indexing"]["commit_chunks_per_s"]
    rows.append(
        (
            "Index commits with / without the full-text index (median chunks/s)",
            f"{fmt(commits['with_fulltext']['median'])} / {fmt(commits['without_fulltext']['median'])}",
            "",
            "",
        )
    )
    return rows


RENDERERS = {
    "encoder": encoder_rows,
    "hybrid": hybrid_rows,
    "multi_instruction": multi_rows,
    "generate_baseline": generate_rows,
    "index": index_rows,
    "training": training_rows,
    "serve": serve_rows,
    "cli": cli_rows,
    "ray": ray_rows,
    "gpu": gpu_rows,
    "reader": lambda result: reader_rows(result),
}


def reader_rows(result: dict) -> list[tuple]:
    """The reader's cost per depth k: p50 (p90) of re-scoring the top k hits."""
    return [
        (
            f"reader: re-score top {key[1:]} ({row['tokens']} tokens)",
            f"p50 {fmt(row['p50_s'], 3)} s (p90 {fmt(row['p90_s'], 3)})",
            "",
            "",
        )
        for key, row in result["by_depth"].items()
    ]


def rows_for(name: str, result: dict) -> list[tuple]:
    for state in ("missing", "failed", "skipped"):
        if state in result:
            return [(f"{name}", f"{state}: {result[state]}", "", "")]
    try:
        return RENDERERS[name](result)
    except (KeyError, TypeError) as exc:  # a script changed its output: say so in the table
        return [(name, f"unreadable result ({type(exc).__name__}: {exc})", "", "")]
