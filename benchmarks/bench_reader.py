"""The reader's cost (issue 67): re-scoring a query's top k hits, p50 over repeats, at k = 10, 20, 50.

    python benchmarks/bench_reader.py [--reader FOLDER] [--quick] [--json-out out.json] [--device cpu]

The hits are the sample documents' chunks as the indexer stores them (instemb_rag/sample_docs,
about 100-250 tokens each), repeated to k; the query and instruction are the demo's. What is timed
is ``Reranker.score`` (tokenising, the reader's forward passes in length-sorted batches, the
fusion), what a search adds to its first stage with the reader on. ``--reader``: a model folder
with a rerank route or a trained reader's final/ (default: the shipped default's reader).
``--smoke``: a tiny reader over tests/testing.py's tiny sentence encoder; its figures mean nothing.
"""

from __future__ import annotations

import time

from bench_common import PROJECT_ROOT, apply_threads, base_parser, emit, machine_info, median, percentile, smoke_run

QUERY = "Which tent should I buy?"
INSTRUCTION = "Focus on durability, materials and weather resistance."
DEPTHS = (10, 20, 50)


def sample_chunks() -> list[str]:
    from llama_index.core.node_parser import SentenceSplitter

    texts = [
        path.read_text(encoding="utf-8")
        for path in sorted((PROJECT_ROOT / "instemb_rag" / "sample_docs").rglob("*.md"))
    ]
    splitter = SentenceSplitter(chunk_size=256, chunk_overlap=32)
    return [chunk for text in texts for chunk in splitter.split_text(text)] or texts


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument(
        "--reader", default=None, help="a model folder with a rerank route, or a trained reader's final/"
    )
    args = parser.parse_args()
    with smoke_run(args) as scratch:
        threads = apply_threads(args.threads)
        from instemb_rag import Reranker

        folder = args.reader
        if scratch is not None and folder is None:
            import sys

            sys.path.insert(0, str(PROJECT_ROOT / "tests"))
            from testing import build_tiny_reader_folder, build_tiny_sentence_encoder_folder

            (scratch / "st").mkdir()
            folder = build_tiny_reader_folder(scratch / "reader", build_tiny_sentence_encoder_folder(scratch / "st"))
        if folder is None:
            from instemb_rag.encoder.model import SHIPPED_MODEL_FOLDER
            from instemb_rag.reader.reranker import has_reader

            if not has_reader(SHIPPED_MODEL_FOLDER):  # a row saying so, as an absent data set's
                skipped = "the shipped default has no reader (issue 67: none shipped); --reader FOLDER times one"
                return emit({"benchmark": "reader", "skipped": skipped}, args.json_out)
        started = time.perf_counter()
        reranker = Reranker.from_pretrained(folder, device=args.device if args.device != "auto" else "cpu")
        load_s = time.perf_counter() - started
        chunks = sample_chunks()
        repeats = 2 if args.smoke else (5 if args.quick else 15)
        depths = (3, 5) if args.smoke else DEPTHS
        results = {}
        for depth in depths:
            texts = (chunks * (depth // len(chunks) + 1))[:depth]
            first = [0.5 - 0.001 * n for n in range(depth)]
            reranker.score(QUERY, INSTRUCTION, texts, first)  # warm-up
            samples = []
            for _ in range(repeats):
                began = time.perf_counter()
                reranker.score(QUERY, INSTRUCTION, texts, first)
                samples.append(time.perf_counter() - began)
            tokens = sum(len(reranker.model.tokenizer(f"{INSTRUCTION} {QUERY}", text)["input_ids"]) for text in texts)
            results[f"k{depth}"] = {
                "p50_s": round(median(samples), 4),
                "p90_s": round(percentile(samples, 90), 4),
                "tokens": tokens,
                "repeats": repeats,
            }
        emit(
            {
                "benchmark": "reader",
                "smoke": bool(args.smoke),
                "machine": machine_info(args.device),
                "threads": threads,
                "reader": str(reranker.source),
                "top_as_shipped": reranker.top,
                "window_tokens": reranker.model.config.max_length,
                "load_s": round(load_s, 3),
                "by_depth": results,
            },
            args.json_out,
        )


if __name__ == "__main__":
    main()
