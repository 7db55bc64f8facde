"""Helpers shared by test modules in several folders (conftest.py holds the fixtures).

tests/ is on sys.path (pytest puts the root conftest's folder there), so any test module
imports these as ``from helpers import ...``.
"""

from __future__ import annotations

import json
from pathlib import Path

DOCS = {
    "d1": ("tent", "the tent is light and durable in rain and wind"),
    "d2": ("stove", "the gas stove burner is compact for a camp trip"),
    "d3": ("backpack", "this backpack frame and strap are heavy but durable"),
    "d4": ("", "a cold night with poor water and bad fuel"),
    "d5": ("pole", "the pole and zipper of the tent floor"),
    "d6": ("review", "a great review of a warm nylon tent"),
}
QUERIES = [
    {"_id": "q1", "text": "light tent for rain", "instruction": "focus on durability"},
    {"_id": "q2", "text": "compact stove"},
    {"_id": "q3", "text": "heavy backpack frame"},
]
QRELS = [("q1", "d1", 1), ("q1", "d5", 1), ("q2", "d2", 1), ("q3", "d3", 1)]


def write_beir_folder(folder: Path, docs=DOCS, queries=QUERIES, qrels=QRELS) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "corpus.jsonl").open("w") as handle:
        for doc_id, (title, text) in docs.items():
            handle.write(json.dumps({"_id": doc_id, "title": title, "text": text}) + "\n")
    with (folder / "queries.jsonl").open("w") as handle:
        for query in queries:
            handle.write(json.dumps(query) + "\n")
    lines = ["query-id\tcorpus-id\tscore"] + [f"{q}\t{d}\t{s}" for q, d, s in qrels]
    (folder / "qrels.tsv").write_text("\n".join(lines) + "\n")
    return folder


def index_cli_args(docs: Path, index_dir: Path, model_dir: Path, *extra: str) -> list[str]:
    """``instemb-rag index`` arguments for a tiny model on the CPU, without progress bars."""
    return [
        "index",
        str(docs),
        "--index-dir",
        str(index_dir),
        "--model",
        str(model_dir),
        "--device",
        "cpu",
        "--no-progress",
        *extra,
    ]


def indexed_state(index_dir: Path) -> dict[str, list[str]]:
    """source -> chunk texts, read straight from the catalog (SQLite, the source of truth)."""
    from instemb_rag.index.catalog import Catalog

    catalog = Catalog.open(index_dir)
    try:
        rows = catalog.connection.execute("SELECT path, text FROM chunks ORDER BY path, position").fetchall()
    finally:
        catalog.close()
    state: dict[str, list[str]] = {}
    for source, text in rows:
        state.setdefault(source, []).append(text)
    return state


def fulltext_matches_chunks(index_dir: Path) -> None:
    """The catalog's full-text index holds exactly the terms of its chunks (as one built afresh
    from them would), and no stale entry of a removed or replaced chunk."""
    from instemb_rag.index import fulltext
    from instemb_rag.index.catalog import Catalog

    catalog = Catalog.open(index_dir)
    try:
        assert catalog.has_fulltext
        ids, texts = zip(*catalog.connection.execute("SELECT id, text FROM chunks").fetchall()) or ((), ())
        stored = fulltext.indexed_terms(catalog.connection)
    finally:
        catalog.close()
    fresh = fulltext.memory_fulltext(texts, ids)
    try:
        assert stored == fulltext.indexed_terms(fresh)
    finally:
        fresh.close()


TINY_RECIPE = "instemb_rag/training/recipes/tiny.yaml"


def tiny_train_config(model_dir: Path, train_file: Path, output_dir: Path, **overrides):
    """The tiny recipe on the tiny test model, reading ``train_file``: a config that trains in seconds."""
    from instemb_rag.training.args import load_config

    values = {
        "model.model_name_or_path": str(model_dir),
        "data.train_file": str(train_file),
        "training.output_dir": str(output_dir),
        **overrides,
    }
    return load_config(TINY_RECIPE, values)


def build_tiny_teacher_folder(folder: Path, dimension: int = 24, seed: int = 0) -> Path:
    """A random tiny BERT + mean pooling saved as a sentence-transformers folder (safetensors)."""
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer
    from testing import WORDS, word_level_tokenizer
    from transformers import BertConfig, BertModel

    tokenizer = word_level_tokenizer(
        WORDS + [":", ",", "?", "!"],
        pad_token="[PAD]",
        unk_token="[UNK]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
    )
    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=len(tokenizer.get_vocab()),
        hidden_size=dimension,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=2 * dimension,
        max_position_embeddings=128,
    )
    bert_dir = folder / "bert"
    BertModel(config).save_pretrained(bert_dir)
    tokenizer.save_pretrained(bert_dir)
    transformer = Transformer(str(bert_dir), max_seq_length=64)
    pooling = Pooling(dimension, pooling_mode="mean")
    SentenceTransformer(modules=[transformer, pooling], device="cpu").save(str(folder / "teacher"))
    return folder / "teacher"


# What bench_gpu.py returns from an H100 run (figures made up, shapes real): run.gpu_rows and
# merge_gpu_results render it.
GPU_BENCH_RESULT = {
    "dtype": "bfloat16",
    "query_latency": {"p50_ms": 6.1, "p99_ms": 9.5, "repeats": 300, "tokens": 44},
    "document_throughput": {
        "best_batch": "batch_128",
        "mean_tokens_per_doc": 380.0,
        "tokens_per_s": 250000.0,
        "model_gflops": 80000.0,
        "fraction_of_measured_peak": 0.12,
        "datasheet_peak": {"gpu": "H100", "bf16_gflops": 989000.0, "fraction": 0.081},
    },
    "matmul_peak": {"dtype": "bf16", "peak_gflops": 660000.0},
    "faiss": {
        "vectors": 100000,
        "queries": 1000,
        "k": 10,
        "cpu_queries_per_s": 900.0,
        "gpu_queries_per_s": 90000.0,
        "gpu_speedup": 100.0,
        "top10_agreement": 1.0,
    },
}
