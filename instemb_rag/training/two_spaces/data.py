"""The two-space trainer's data: the query tower's queries and passages, plus the LLM document half.

Both document halves of every passage are embedded once and cached on disk (teachers/cache.py),
each keyed on what made it: the sentence encoder's fingerprint, the documents' LLM's document
fingerprint. The LLM half is the slow one (about 10-20 passages/s on two CPU cores); a killed
run keeps every finished shard and resumes there.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import torch

from ...datasets.embedding_items import read_items
from ...paths import instemb_home
from ..query_tower.data import QueryTowerData, load_data

LLM_SHARD_ROWS = 512


class DocumentLLMAsTeacher:
    """A symmetric encoder's document embedding as the embedding cache sees a teacher."""

    def __init__(self, encoder, name: str, log=print):
        self.encoder, self.name, self.log = encoder, name, log
        self.fingerprint, self.dimension = encoder.document_fingerprint, encoder.dimension
        self.done, self.started = 0, time.perf_counter()

    def encode(self, texts, batch_size: int = 16, show_progress: bool = False):
        vectors = self.encoder.encode_documents(list(texts), None, batch_size=16)
        self.done += len(texts)
        self.log(
            f"LLM document half: {self.done} passages embedded, {self.done / (time.perf_counter() - self.started):.1f}/s"
        )
        return vectors


def llm_half_name(reference: str) -> str:
    """The cache's label of a documents' LLM: ``llm-default`` or ``llm-<folder name>``."""
    return "llm-" + (Path(reference).name if reference not in ("", "default") else "default")


def cached_llm_half(encoder, reference: str, passages: list[str], embedding_dir: str | None, log=print) -> torch.Tensor:
    from ...teachers.cache import cached_embeddings

    folder = Path(embedding_dir) if embedding_dir else instemb_home() / "teacher_embeddings"
    teacher = DocumentLLMAsTeacher(encoder, llm_half_name(reference), log)
    vectors = cached_embeddings(teacher, passages, folder, shard_rows=LLM_SHARD_ROWS)
    return torch.as_tensor(vectors, dtype=torch.float32)


@dataclass
class TwoSpacesData:
    halves: QueryTowerData  # queries, positives, groups, the tower half of passages, the anchors
    llm_passages: torch.Tensor  # [P, d_llm] the LLM half of the same passages, normalised


def load_two_spaces_data(texts_file, max_queries, tower, documents_llm, reference, embedding_dir, log=print):
    halves = load_data(texts_file, max_queries, tower, embedding_dir, log)
    passages = [item.text for item in read_items(texts_file) if item.role == "passage"]
    started = time.perf_counter()
    llm_passages = cached_llm_half(documents_llm, reference, passages, embedding_dir, log)
    log(f"LLM document half: {len(passages)} passages ready in {time.perf_counter() - started:.0f} s")
    return TwoSpacesData(halves, llm_passages)
