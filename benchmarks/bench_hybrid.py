"""Hybrid search cost: fused vs dense query latency, and what the full-text index adds to indexing.

    python benchmarks/bench_hybrid.py --limit 300 --queries 40 [--json-out PATH]

Indexes the first --limit NPL/Vaswani abstracts (as bench_index.py does) with the shipped
default model, then times, query by query and interleaved (so a shared machine's load falls on
both alike), ``Index.search`` end to end (one prefill + search + rows) dense and with
``hybrid="rrf"`` and ``"z"``, and the search part alone (the query vector given). Indexing: the
run's chunks/s (embedding dominates), and the catalog commits alone replayed into a fresh
catalog with and without the full-text index (the only part of indexing this feature changes),
alternating rounds.

``--smoke`` runs it all in seconds on the tiny random model of tests/testing.py, 8 abstracts, 3
queries and one commit round (made-up texts where ../shared/data is absent): the figures mean nothing.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from bench_common import SHARED_DATA, apply_threads, base_parser, emit, machine_info, percentile, smoke_run
from bench_index import corpus_and_queries, write_corpus

DATA = SHARED_DATA / "vaswani"
INSTRUCTION = "Find physics abstracts relevant to this search query."  # the vaswani task's


def timed_ms(call, *args, **kwargs) -> float:
    started = time.perf_counter()
    call(*args, **kwargs)
    return (time.perf_counter() - started) * 1000


def replay_commits(catalog_dir: Path, files: list[tuple], with_fulltext: bool) -> float:
    """Seconds to commit ``files`` (source, sha, size, chunks, vectors) into a fresh catalog."""
    from instemb_rag.index.catalog import Catalog

    catalog_dir.mkdir(parents=True)
    catalog = Catalog.open(catalog_dir)
    if with_fulltext:
        catalog.ensure_fulltext()
    started = time.perf_counter()
    for source, sha256, size, chunks, vectors in files:
        catalog.replace_file(source, sha256, size, chunks, vectors)
    seconds = time.perf_counter() - started
    catalog.close()
    return seconds


def stored_files(index_dir: Path, dimension: int) -> list[tuple]:
    """Every file of an index as replace_file arguments, read back from its catalog."""
    from types import SimpleNamespace

    from instemb_rag.index.catalog import Catalog

    catalog = Catalog.open(index_dir)
    files = []
    for source, sha256, size in catalog.connection.execute("SELECT path, sha256, size FROM files ORDER BY path"):
        ids = catalog.ids_of_sources([source]).tolist()
        rows = catalog.rows(ids)
        ordered = sorted(rows.values(), key=lambda row: row.position)
        chunk_ids, vectors = catalog.vectors([row.id for row in ordered], dimension)
        by_id = dict(zip(chunk_ids.tolist(), vectors))
        chunks = [SimpleNamespace(position=row.position, text=row.text, extra=row.extra) for row in ordered]
        files.append((source, sha256, size, chunks, [by_id[row.id] for row in ordered]))
    catalog.close()
    return files


def main(argv: list[str] | None = None) -> dict:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=None, help="Abstracts to index (default 300, quick 100, smoke 8).")
    parser.add_argument(
        "--queries", type=int, default=None, help="Queries timed (default 40, quick 15, smoke 3; 93 in all)."
    )
    parser.add_argument(
        "--commit-rounds",
        type=int,
        default=None,
        help="Replays of the commits with and without FTS (default 5, smoke 1).",
    )
    parser.add_argument(
        "--model",
        default=None,
        help="Encoder folder (default: the shipped model). A tiny test model isolates what fusion adds to the search.",
    )
    args = parser.parse_args(argv)
    if not DATA.is_dir() and not args.smoke:
        return emit({"benchmark": "hybrid", "skipped": f"{DATA} is absent (development data)"}, args.json_out)
    with smoke_run(args):
        result = measure(args)
    return emit(result, args.json_out)


def measure(args) -> dict:
    limit = args.limit or (8 if args.smoke else 100 if args.quick else 300)
    query_count = args.queries or (3 if args.smoke else 15 if args.quick else 40)
    commit_rounds = args.commit_rounds or (1 if args.smoke else 5)
    threads = apply_threads(args.threads)

    import numpy as np

    from instemb_rag import InstEmbEncoder
    from instemb_rag.index import Index, Indexer, IndexOptions

    encoder = InstEmbEncoder.from_pretrained(args.model, device=args.device)
    documents, queries, abstracts = corpus_and_queries(limit, args.smoke)
    queries = queries[:query_count]
    modes = {"dense": None, "hybrid_rrf": "rrf", "hybrid_z": "z"}
    end_to_end: dict[str, list[float]] = {name: [] for name in modes}
    search_only: dict[str, list[float]] = {name: [] for name in modes}
    with tempfile.TemporaryDirectory() as scratch:
        corpus_dir, index_dir = Path(scratch) / "corpus", Path(scratch) / "index"
        write_corpus(documents, corpus_dir)
        label = str(Path(args.model).resolve()) if args.model else "default"
        report = Indexer(encoder, IndexOptions(index_dir=index_dir, model_label=label)).run(corpus_dir)
        with Index.open(index_dir, encoder=encoder) as index:
            index.search(queries[0], INSTRUCTION, k=10, hybrid="rrf")  # warm-up: first prefill, FAISS load
            for query in queries:
                vector = encoder.encode_queries([query], INSTRUCTION)[0]
                for name, mode in modes.items():
                    end_to_end[name].append(timed_ms(index.search, query, INSTRUCTION, k=10, hybrid=mode))
                    search_only[name].append(
                        timed_ms(index.search, query, INSTRUCTION, k=10, hybrid=mode, query_vector=vector)
                    )
        files = stored_files(index_dir, encoder.dimension)
        commits = {"with_fulltext": [], "without_fulltext": []}
        for round_number in range(commit_rounds):
            for name in commits:
                folder = Path(scratch) / f"replay-{name}-{round_number}"
                commits[name].append(replay_commits(folder, files, with_fulltext=name == "with_fulltext"))
    chunks = report.chunks_total

    def summary(values: list[float]) -> dict:
        return {"p50": percentile(values, 50), "p95": percentile(values, 95)}

    p50 = {name: percentile(values, 50) for name, values in end_to_end.items()}
    return {
        "benchmark": "hybrid",
        "machine": machine_info(args.device),
        "model": args.model or "default",
        "threads": threads,
        "quick": args.quick,
        "smoke": args.smoke,
        "corpus": {"documents": len(documents), "of": abstracts, "chunks": chunks},
        "queries_timed": len(queries),
        "query_latency_ms": {name: summary(values) for name, values in end_to_end.items()},
        "search_only_ms": {name: summary(values) for name, values in search_only.items()},
        "fused_over_dense_p50": {name: p50[name] / p50["dense"] for name in modes if name != "dense"},
        "indexing": {
            "chunks_per_s": report.chunks_added / report.seconds,
            "seconds": report.seconds,
            "commit_chunks_per_s": {
                name: {
                    "median": float(np.median([chunks / seconds for seconds in values])),
                    "rounds": [round(chunks / seconds, 1) for seconds in values],
                }
                for name, values in commits.items()
            },
        },
    }


if __name__ == "__main__":
    main()
