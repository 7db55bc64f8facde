"""Indexing throughput, end-to-end query latency and HNSW recall on NPL/Vaswani abstracts.

    python benchmarks/bench_index.py --limit 1000 --queries 30

Writes the first --limit abstracts of ../shared/data/vaswani as files under runs/, indexes
them with `Indexer` (FAISS exact) into runs/bench_index/index-<limit> (incremental: a second
run reuses the embeddings and skips the throughput figure), then times query -> one prefill
-> search -> catalog rows for FAISS flat, FAISS HNSW and embedded Qdrant, and measures HNSW
recall@10 against exact search on all 93 queries. Embeddings are also saved as .npy there.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "vaswani"
RUNS = ROOT / "runs" / "bench_index"


def load_jsonl(path: Path, limit: int | None = None) -> list[dict]:
    rows = []
    with open(path, encoding="utf-8") as stream:
        for line in stream:
            rows.append(json.loads(line))
            if limit and len(rows) >= limit:
                break
    return rows


def write_corpus(documents: list[dict], folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for document in documents:
        path = folder / f"{document['_id']}.txt"
        text = (document.get("title", "") + "\n" + document["text"]).strip()
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")


def percentiles(samples: list[float]) -> str:
    return f"p50 {np.percentile(samples, 50):7.1f} ms   p95 {np.percentile(samples, 95):7.1f} ms"


def time_queries(encoder, catalog, queries: list[str], search) -> list[float]:
    """Milliseconds per query for encode (one prefill) + search + reading the hit rows."""
    latencies = []
    for query in queries:
        started = time.perf_counter()
        vector = encoder.encode_queries([query])[0]
        ranked = search(vector)
        catalog.rows([chunk_id for chunk_id, _ in ranked])
        latencies.append((time.perf_counter() - started) * 1000)
    return latencies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=1000, help="Abstracts to index (11,429 in all).")
    parser.add_argument("--queries", type=int, default=30, help="Queries timed per store.")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    if not DATA.is_dir():
        sys.exit(f"{DATA} is absent: this benchmark needs the development data in ../shared/data.")

    from instemb_rag import InstEmbEncoder
    from instemb_rag.index import Indexer, IndexOptions
    from instemb_rag.index import faiss_store
    from instemb_rag.index.catalog import Catalog
    from instemb_rag.index.qdrant_store import EmbeddedQdrant

    encoder = InstEmbEncoder.from_pretrained(device=args.device)
    corpus_dir, index_dir = RUNS / f"corpus-{args.limit}", RUNS / f"index-{args.limit}"
    write_corpus(load_jsonl(DATA / "corpus.jsonl", args.limit), corpus_dir)
    report = Indexer(encoder, IndexOptions(index_dir=index_dir, model_label="default")).run(corpus_dir)
    print(f"corpus: {args.limit} Vaswani abstracts, {report.chunks_total} chunks, model default, device {args.device}")
    if report.chunks_added:
        print(f"indexing: {report.chunks_added} chunks in {report.seconds:.1f} s = "
              f"{report.chunks_added / report.seconds:.2f} chunks/s (read + split + embed + commit + FAISS)")
    else:
        print("indexing: reused the existing index (no throughput figure; delete runs/bench_index to measure)")

    catalog = Catalog.open(index_dir)
    ids, vectors = catalog.vectors(dimension=encoder.dimension)
    np.save(RUNS / f"embeddings-{args.limit}.npy", vectors)
    queries = [row["text"] for row in load_jsonl(DATA / "queries.jsonl")]
    flat = faiss_store.build_index("flat", ids, vectors, encoder.dimension)
    started = time.perf_counter()
    hnsw = faiss_store.build_index("hnsw", ids, vectors, encoder.dimension)
    print(f"HNSW build: {time.perf_counter() - started:.2f} s")

    timed = queries[: args.queries]
    results = {
        "FAISS exact (flat)": time_queries(encoder, catalog, timed, lambda v: faiss_store.search(flat, v, 10, None)),
        "FAISS HNSW": time_queries(encoder, catalog, timed, lambda v: faiss_store.search(hnsw, v, 10, None)),
    }
    with tempfile.TemporaryDirectory() as scratch:
        shard = EmbeddedQdrant(Path(scratch), encoder.dimension)
        shard.upsert(ids.tolist(), vectors, catalog.payloads(ids.tolist()))
        shard.finish()
        results["Qdrant embedded (edge)"] = time_queries(encoder, catalog, timed, lambda v: shard.search(v, 10, None))
        shard.close()
    encode_only = time_queries(encoder, catalog, timed, lambda v: [])
    print(f"query latency, end to end ({len(timed)} queries, top-10):")
    for name, latencies in results.items():
        print(f"  {name:24s} {percentiles(latencies)}")
    print(f"  {'(query encoding alone)':24s} {percentiles(encode_only)}")

    query_vectors = encoder.encode_queries(queries)
    overlaps = []
    for vector in query_vectors:
        exact = {i for i, _ in faiss_store.search(flat, vector, 10, None)}
        approximate = {i for i, _ in faiss_store.search(hnsw, vector, 10, None)}
        overlaps.append(len(exact & approximate) / len(exact))
    print(f"HNSW recall@10 vs exact ({len(queries)} queries, M={faiss_store.HNSW_NEIGHBOURS}, "
          f"efSearch={faiss_store.HNSW_EF_SEARCH}): {np.mean(overlaps):.4f}")
    catalog.close()


if __name__ == "__main__":
    main()
