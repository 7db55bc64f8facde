"""Indexing throughput, end-to-end query latency and HNSW recall on NPL/Vaswani abstracts; with
--prose, the document pass on a folder of prose against the machine's matmul rate (issue 69).

    python benchmarks/bench_index.py --limit 1000 --queries 30 [--quick] [--json-out PATH]
    python benchmarks/bench_index.py --prose [--limit CHUNKS] [--precision int8] [--json-out PATH]

--prose indexes this checkout's docs/*.md (Markdown prose, about 270 chunks of the default model)
with `Indexer` as `instemb-rag index` does (read, split, embed, SQLite, FAISS) and writes chunks/s
and tokens/s (end to end, and of the embedding alone), the model's useful FLOPs (each document
part: 2 x non-embedding params per token + attention) per second, the best fp32 matmul rate
measured before and after the run, and their ratio; then where the time went (reading and
splitting, each part's pass alone on a sample, padding, SQLite commits). Figures taken while other
processes use the cores are "under load": compare ratios, which share the load, not absolutes.

Writes the first --limit abstracts of ../shared/data/vaswani as files in a scratch folder,
indexes them with `Indexer` (read + split + embed + SQLite commit + FAISS), then times
query -> one prefill -> search -> catalog rows for FAISS flat, FAISS HNSW and embedded Qdrant,
and measures HNSW recall@10 against exact search on all 93 queries. The full 11,429
abstracts take ~40 min to embed on a 2-core CPU, hence the subset; chunks/s does not depend
on the corpus size, and HNSW recall on a larger corpus is lower than on this subset.

``--smoke`` runs it all in seconds on the tiny random model of tests/testing.py, 8 abstracts and
3 timed queries (made-up ones where ../shared/data is absent): the figures mean nothing.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np
from bench_common import SHARED_DATA, apply_threads, base_parser, emit, machine_info, percentile, smoke_run

DATA = SHARED_DATA / "vaswani"
VASWANI_ABSTRACTS = 11429
# --smoke where ../shared/data is absent: a handful of made-up abstracts and queries
SMOKE_TEXTS = [
    "the tent is light and durable in rain and wind",
    "the gas stove burner is compact for a camp trip",
    "this backpack frame and strap are heavy but durable",
    "a cold night with poor water and bad fuel",
    "the pole and zipper of the tent floor",
    "a great review of a warm nylon tent",
    "the packed size and weight of the stove in kg",
    "what is the focus of this review of the frame",
]
SMOKE_QUERIES = ["light tent for rain", "compact stove", "heavy backpack frame", "warm nylon tent"]


def load_jsonl(path: Path, limit: int | None = None) -> list[dict]:
    from instemb_rag.jsonl import read_jsonl_objects

    return read_jsonl_objects(path, limit)


def corpus_and_queries(limit: int, smoke: bool) -> tuple[list[dict], list[str], int]:
    """(the first ``limit`` Vaswani abstracts, all its query texts, abstracts in all); with
    ``smoke`` where the data are absent, the made-up ones."""
    if smoke and not DATA.is_dir():
        documents = [{"_id": f"d{n}", "title": "", "text": text} for n, text in enumerate(SMOKE_TEXTS[:limit])]
        return documents, SMOKE_QUERIES, len(SMOKE_TEXTS)
    queries = [row["text"] for row in load_jsonl(DATA / "queries.jsonl")]
    return load_jsonl(DATA / "corpus.jsonl", limit), queries, VASWANI_ABSTRACTS


def write_corpus(documents: list[dict], folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for document in documents:
        path = folder / f"{document['_id']}.txt"
        text = (document.get("title", "") + "\n" + document["text"]).strip()
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")


def time_queries(encoder, catalog, queries: list[str], search, instruction: str | None = None) -> list[float]:
    """Milliseconds per query for encode (one prefill) + search + reading the hit rows."""
    latencies = []
    for query in queries:
        started = time.perf_counter()
        vector = encoder.encode_queries([query], [instruction])[0]
        ranked = search(vector)
        catalog.rows([chunk_id for chunk_id, _ in ranked])
        latencies.append((time.perf_counter() - started) * 1000)
    return latencies


def main(argv: list[str] | None = None) -> dict:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument(
        "--limit", type=int, default=None, help="Abstracts to index (11,429 in all; default 1000, quick 300, smoke 8)."
    )
    parser.add_argument(
        "--queries", type=int, default=None, help="Queries timed per store (default 30, quick 15, smoke 3)."
    )
    parser.add_argument(
        "--compile",
        action="store_true",
        help="torch.compile the backbone (cached under INSTEMB_HOME/compile): run once on a small --limit to pay "
        "the compile, then again to time an index run that loads the cached graph.",
    )
    parser.add_argument("--precision", choices=["fp32", "int8"], default="fp32", help="Backbone precision.")
    parser.add_argument(
        "--prose",
        action="store_true",
        help="Time the document pass on this checkout's docs/*.md against the matmul rate (--limit: about that "
        "many chunks; default all, quick 120, smoke 8) instead of the Vaswani index and queries.",
    )
    parser.add_argument(
        "--model", default=None, help="A checkpoint folder (a two-tower one too); default: the shipped default."
    )
    parser.add_argument(
        "--instruction",
        default=None,
        help="Every timed query under this instruction (an instruction-effect model embeds a query "
        "without one by its sentence encoder alone: time it with one to see the LLM's prefill).",
    )
    args = parser.parse_args(argv)
    if args.prose:
        with smoke_run(args):
            result = measure_prose(args)
        return emit(result, args.json_out)
    if not DATA.is_dir() and not args.smoke:
        return emit({"benchmark": "index", "skipped": f"{DATA} is absent (development data)"}, args.json_out)
    with smoke_run(args):
        result = measure(args)
    return emit(result, args.json_out)


def measure(args) -> dict:
    limit = args.limit or (8 if args.smoke else 300 if args.quick else 1000)
    query_count = args.queries or (3 if args.smoke else 15 if args.quick else 30)
    threads = apply_threads(args.threads)

    from instemb_rag import InstEmbEncoder
    from instemb_rag.index import Indexer, IndexOptions, StoreOptions
    from instemb_rag.index.catalog import Catalog
    from instemb_rag.index.stores import faiss as faiss_store
    from instemb_rag.index.stores.qdrant import QdrantStore

    encoder = InstEmbEncoder.from_pretrained(args.model, device=args.device, precision=args.precision)
    first_call_s = None
    if args.compile:
        from instemb_rag.encoder.fast.compiled import compile_encoder

        compile_encoder(encoder)
        started = time.perf_counter()
        # The first forward builds the graph, or loads it from the cache a previous process filled.
        # Two passages: torch specializes a batch of one, which would be a second graph.
        encoder.encode_documents(["A warm-up passage that triggers the compile.", "And a second, longer one."])
        first_call_s = time.perf_counter() - started
    with tempfile.TemporaryDirectory() as scratch:
        corpus_dir, index_dir = Path(scratch) / "corpus", Path(scratch) / "index"
        documents, queries, abstracts = corpus_and_queries(limit, args.smoke)
        write_corpus(documents, corpus_dir)
        # A fresh index every run, so the throughput figure always measures real work.
        label = str(Path(args.model).resolve()) if args.model else "default"
        report = Indexer(encoder, IndexOptions(index_dir=index_dir, model_label=label)).run(corpus_dir)
        catalog = Catalog.open(index_dir)
        ids, vectors = catalog.vectors(dimension=encoder.dimension)
        flat = faiss_store.build_index("flat", ids, vectors, encoder.dimension)
        started = time.perf_counter()
        hnsw = faiss_store.build_index("hnsw", ids, vectors, encoder.dimension)
        hnsw_build_s = time.perf_counter() - started

        timed = queries[:query_count]
        latencies = {
            "faiss_flat": time_queries(
                encoder, catalog, timed, lambda v: faiss_store.search(flat, v, 10, None), args.instruction
            ),
            "faiss_hnsw": time_queries(
                encoder, catalog, timed, lambda v: faiss_store.search(hnsw, v, 10, None), args.instruction
            ),
        }
        shard = QdrantStore.open(Path(scratch) / "qdrant", None, StoreOptions(store="qdrant"), encoder.dimension)
        shard.upsert(ids.tolist(), vectors, catalog.payloads(ids.tolist()))
        shard.flush(optimize=True)
        latencies["qdrant_embedded"] = time_queries(
            encoder, catalog, timed, lambda v: shard.search(v, 10, None), args.instruction
        )
        shard.close()
        latencies["encode_only"] = time_queries(encoder, catalog, timed, lambda v: [], args.instruction)

        query_vectors = encoder.encode_queries(queries)
        overlaps = []
        for vector in query_vectors:
            exact = {i for i, _ in faiss_store.search(flat, vector, 10, None)}
            approximate = {i for i, _ in faiss_store.search(hnsw, vector, 10, None)}
            overlaps.append(len(exact & approximate) / len(exact))
        catalog.close()
    return {
        "benchmark": "index",
        "machine": machine_info(args.device),
        "threads": threads,
        "quick": args.quick,
        "smoke": args.smoke,
        "precision": args.precision,
        "model": args.model or "default",
        "query_instruction": args.instruction,
        "two_tower": bool(getattr(encoder, "is_two_tower", False)),
        "compile": {"enabled": args.compile, "first_call_s": first_call_s},
        "corpus": {"documents": len(documents), "of": abstracts, "chunks": report.chunks_total},
        "indexing": {"chunks_per_s": report.chunks_added / report.seconds, "seconds": report.seconds},
        "query_latency_ms": {
            name: {"p50": percentile(values, 50), "p95": percentile(values, 95)} for name, values in latencies.items()
        },
        "queries_timed": len(timed),
        "hnsw": {
            "recall_at_10": float(np.mean(overlaps)),
            "queries": len(queries),
            "build_s": hnsw_build_s,
            "M": faiss_store.HNSW_NEIGHBOURS,
            "ef_search": faiss_store.HNSW_EF_SEARCH,
        },
    }


def measure_prose(args) -> dict:
    from prose_pass import measure_prose_pass

    return measure_prose_pass(args)


if __name__ == "__main__":
    main()
