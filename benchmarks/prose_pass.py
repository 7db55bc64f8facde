"""`bench_index.py --prose`: the document pass on a folder of prose against the machine's own fp32
matmul rate, and where its time goes (issue 69). A module of bench_index.py, not a script."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from bench_common import PROJECT_ROOT, apply_threads, machine_info, matmul_peak_gflops

PROSE = PROJECT_ROOT / "docs"
CHARACTERS_PER_CHUNK = 1000  # about 256 tokens of English prose: how --limit picks files
STAGE_SAMPLE = 32  # chunks each part embeds alone for the stage figures


def copy_prose(target: Path, limit_chunks: int | None) -> list[Path]:
    """docs/*.md in name order, until their characters make about ``limit_chunks`` chunks (the last
    one cut at a paragraph)."""
    target.mkdir(parents=True)
    copied, budget = [], None if limit_chunks is None else limit_chunks * CHARACTERS_PER_CHUNK
    for path in sorted(PROSE.glob("*.md")):
        text = path.read_text(encoding="utf-8")
        if budget is not None:
            if budget <= 0:
                break
            if len(text) > budget:
                text = text[: text.rfind("\n\n", 0, budget) if "\n\n" in text[:budget] else budget]
            budget -= len(text)
        (target / path.name).write_text(text, encoding="utf-8")
        copied.append(target / path.name)
    return copied


def document_parts(encoder) -> tuple[list, list]:
    """(LLM parts, sentence-encoder parts) that embed documents."""
    parts = list(getattr(encoder, "parts", {}).values()) or [encoder]
    side = {part.name for part in encoder.document_side.parts}
    llms = [part for part in parts if hasattr(part, "build_ids")]
    sentence_encoders = [part for part in parts if hasattr(part, "teacher") and part.reference in side]
    return llms, sentence_encoders


def llm_flops(llm, text: str) -> tuple[int, float]:
    """(tokens, useful FLOPs) of one chunk through a decoder: 2 x non-embedding params per token +
    causal attention (QK^T and AV)."""
    from bench_encoder import forward_flops

    tokens = len(llm.build_ids(text, None))
    return tokens, forward_flops(llm, tokens)


def sentence_encoder_flops(part, text: str) -> tuple[int, float]:
    """(tokens, useful FLOPs) of one chunk through a BERT-like sentence encoder (full attention)."""
    loaded = part.teacher.model  # teachers/st_folder.py SentenceEncoderModel, or a SentenceTransformer
    model = loaded.transformer if hasattr(loaded, "transformer") else loaded[0].auto_model
    config = model.config
    embeddings = sum(p.numel() for p in model.embeddings.parameters())
    non_embedding = sum(p.numel() for p in model.parameters()) - embeddings
    tokens = min(part.tokens(text), part.max_length)
    attention = 2 * 2 * config.num_hidden_layers * config.hidden_size * tokens * tokens
    return tokens, 2 * non_embedding * tokens + attention


def padding_share(lengths: list[int], batch_size: int, window: int) -> float:
    """Padded positions / all positions when windows of ``window`` chunks are sorted by length and
    cut into batches (what local_embedding.py does)."""
    padded = real = 0
    for start in range(0, len(lengths), window):
        ordered = sorted(lengths[start : start + window], reverse=True)
        for first in range(0, len(ordered), batch_size):
            batch = ordered[first : first + batch_size]
            padded += batch[0] * len(batch)
            real += sum(batch)
    return 1 - real / padded if padded else 0.0


def timed(fn) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def measure_prose_pass(args) -> dict:
    threads = apply_threads(args.threads)
    limit = args.limit or (8 if args.smoke else 120 if args.quick else None)

    from instemb_rag import InstEmbEncoder
    from instemb_rag.index import Indexer, IndexOptions
    from instemb_rag.index.catalog import Catalog
    from instemb_rag.index.documents import ChunkSplitter, chunking_tokenizer, read_texts
    from instemb_rag.index.local_embedding import WINDOW_BATCHES
    from instemb_rag.index.selection import FileSelection

    encoder = InstEmbEncoder.from_pretrained(args.model, device=args.device, precision=args.precision)
    peak_before = matmul_peak_gflops(args.device, quick=True)
    with tempfile.TemporaryDirectory() as scratch:
        corpus, index_dir = Path(scratch) / "prose", Path(scratch) / "index"
        files = copy_prose(corpus, limit)
        options = IndexOptions(index_dir=index_dir, selection=FileSelection(include=("*.md",)))
        indexer = Indexer(encoder, options)
        report = indexer.run(corpus)
        peak_after = matmul_peak_gflops(args.device, quick=True)
        catalog = Catalog.open(index_dir)
        texts = [row[0] for row in catalog.connection.execute("SELECT text FROM chunks ORDER BY path, position")]
        catalog.close()

        llms, sentence_encoders = document_parts(encoder)
        llm_counts = [llm_flops(llm, text) for llm in llms for text in texts]
        se_counts = [sentence_encoder_flops(part, text) for part in sentence_encoders for text in texts]
        llm_gflop = sum(flops for _, flops in llm_counts) / 1e9
        se_gflop = sum(flops for _, flops in se_counts) / 1e9
        tokens = sum(count for count, _ in llm_counts) or sum(count for count, _ in se_counts)
        peak = max(peak_before["peak_gflops"], peak_after["peak_gflops"])

        # Where the time goes: each stage alone.
        splitter = ChunkSplitter(chunking_tokenizer(encoder), indexer.options.chunk_size, indexer.options.chunk_overlap)
        read_split_s = timed(lambda: [splitter.split(read_texts(path)) for path in sorted(corpus.glob("*.md"))])
        sample = texts[: min(STAGE_SAMPLE, len(texts))]
        batch = options.batch_size
        stages = {"read_and_split_all_s": read_split_s, "sample_chunks": len(sample)}
        for llm in llms:
            llm.encode_documents(sample[:2], batch_size=2)  # warm-up
            stages["llm_pass_sample_s"] = timed(lambda llm=llm: llm.encode_documents(sample, batch_size=batch))
        for part in sentence_encoders:
            stages["sentence_encoder_pass_sample_s"] = timed(
                lambda part=part: part.encode_documents(sample, batch_size=batch)
            )
        lengths = [count for count, _ in llm_counts[: len(texts)]]
        stages["padding_share_windows"] = padding_share(lengths, batch, batch * WINDOW_BATCHES)
        stages["padding_share_file_order"] = padding_share(lengths, batch, batch)
    embedding_rate = (llm_gflop + se_gflop) / report.embedding_seconds if report.embedding_seconds else 0.0
    end_to_end_rate = (llm_gflop + se_gflop) / report.seconds if report.seconds else 0.0
    return {
        "benchmark": "index_prose",
        "machine": machine_info(args.device),
        "threads": threads,
        "quick": args.quick,
        "smoke": args.smoke,
        "precision": args.precision,
        "model": args.model or "default",
        "corpus": {"files": len(files), "of": len(list(PROSE.glob("*.md"))), "chunks": report.chunks_added},
        "tokens": tokens,
        "indexing": {
            "seconds": report.seconds,
            "embedding_seconds": report.embedding_seconds,
            "chunks_per_s": report.chunks_added / report.seconds,
            "tokens_per_s": tokens / report.seconds,
            "embedding_chunks_per_s": report.embedded_chunks / report.embedding_seconds,
            "embedding_tokens_per_s": tokens / report.embedding_seconds,
            "estimate_s": report.estimate.seconds if report.estimate else None,
        },
        "model_gflop": {"llm": llm_gflop, "sentence_encoder": se_gflop},
        "model_gflops": {"embedding": embedding_rate, "end_to_end": end_to_end_rate},
        "matmul_peak": {"peak_gflops": peak, "before": peak_before, "after": peak_after},
        "fraction_of_matmul_peak": {
            "embedding": embedding_rate / peak,
            "end_to_end": end_to_end_rate / peak,
            "llm_flops_only_end_to_end": llm_gflop / report.seconds / peak,
        },
        "stages": stages,
    }
