"""Every vector the effect query side trains on, embedded once and cached on disk.

Nothing below the effect map trains, so each query and passage goes through the frozen parts
once: the shipped LLM (D) and all-MiniLM-L6-v2 (M). Each set is a ``teachers/cache.py`` cache
keyed on the encoder's fingerprint and the text, written one shard at a time: a killed run
keeps every finished shard and resumes there.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from ...paths import instemb_home

QUERY_SHARD_ROWS = 512


class QueryLLMAsTeacher:
    """An LLM's query embedding as the cache sees a teacher: each cached text is the JSON pair
    ``[query, instruction]``, so the same query under two instructions is two rows."""

    def __init__(self, encoder, name: str, log=print):
        self.encoder, self.name, self.log = encoder, name, log
        self.fingerprint, self.dimension = encoder.fingerprint, encoder.dimension
        self.done, self.started = 0, time.perf_counter()

    def encode(self, keys: Sequence[str], batch_size: int = 32, show_progress: bool = False) -> np.ndarray:
        pairs = [json.loads(key) for key in keys]
        vectors = self.encoder.encode_queries([q for q, _ in pairs], [i for _, i in pairs], batch_size=32)
        self.done += len(pairs)
        self.log(f"{self.name}: {self.done} queries embedded, {self.done / (time.perf_counter() - self.started):.1f}/s")
        return vectors


def pair_key(query: str, instruction: str | None) -> str:
    return json.dumps([query, instruction], ensure_ascii=False)


def cache_effect_vectors(items, embedding_dir: str | None = None, llm=None, sentence_encoder=None, log=print) -> dict:
    """``{"llm_passages", "sentence_encoder_passages", "llm_queries", "llm_references", "sentence_encoder_queries"}``:
    float32 tensors, rows in the order of the items' passages and queries (queries with an
    instruction: a query without one is the sentence encoder's alone, nothing to train)."""
    from ...encoder.composed.effect import REFERENCE_INSTRUCTION
    from ...teachers.cache import cached_embeddings
    from ...teachers.teacher import teacher_text
    from ..cached_vectors import cached_llm_vectors

    llm, sentence_encoder = _frozen_parts(llm, sentence_encoder)
    folder = Path(embedding_dir) if embedding_dir else instemb_home() / "teacher_embeddings"
    passages = [item.text for item in items if item.role == "passage"]
    queries = [item for item in items if item.role == "query" and item.instruction]
    queries_side = QueryLLMAsTeacher(llm, "llm-default-queries", log)
    as_tensor = lambda array: torch.as_tensor(np.asarray(array), dtype=torch.float32)  # noqa: E731
    vectors = {}
    # Queries first: they are quick, and a run stopped in the passages has them all.
    vectors["sentence_encoder_queries"] = as_tensor(
        cached_embeddings(sentence_encoder.teacher, [teacher_text(q.text, q.instruction) for q in queries], folder)
    )
    keys = [pair_key(q.text, q.instruction) for q in queries] + [
        pair_key(q.text, REFERENCE_INSTRUCTION) for q in queries
    ]
    both = as_tensor(cached_embeddings(queries_side, keys, folder, shard_rows=QUERY_SHARD_ROWS))
    vectors["llm_queries"], vectors["llm_references"] = both[: len(queries)], both[len(queries) :]
    vectors["sentence_encoder_passages"] = as_tensor(cached_embeddings(sentence_encoder.teacher, passages, folder))
    vectors["llm_passages"] = cached_llm_vectors(llm, "default", passages, embedding_dir, log)
    return vectors


def _frozen_parts(llm, sentence_encoder):
    from ...encoder import InstEmbEncoder, shipped_llm_folder
    from ...encoder.modules.sentence_encoder import SentenceEncoder

    if llm is None:
        llm = InstEmbEncoder.from_pretrained(shipped_llm_folder())
    if sentence_encoder is None:
        sentence_encoder = SentenceEncoder.load(SentenceEncoder.recorded_reference("minilm"))
    return llm, sentence_encoder
