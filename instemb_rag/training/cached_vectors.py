"""The vectors the query-side recipes rank over, embedded once by frozen parts and cached on disk.

two_tower/, two_spaces/ and effect/ each train a query side against documents that do not
change, so every vector below what trains is embedded once through teachers/cache.py, keyed on
what made it (the encoder's fingerprint) and the text, one shard at a time: a killed run keeps
every finished shard and resumes there.

- ``load_data``: from one embedding-items file (datasets/embedding_items.py, built by
  ``build-distill-texts``), each query with a positive, the passage bank, and the sentence
  encoder's vectors of the passages and of each query's "instruction + query" (its anchor), as a
  ``RankingData`` (``QueryTowerData`` before issue 68); a query's group names its hard
  negatives (the group's other passages);
- ``cached_llm_vectors``: a documents' LLM's vectors of the passages (the documents' LLM-space vectors; the slow
  one, about 10-20 passages/s on two CPU cores).
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from ..datasets.embedding_items import EmbeddingItem, read_items
from ..errors import InstEmbError
from ..paths import instemb_home

LLM_SHARD_ROWS = 512


@dataclass
class RankingData:
    queries: list[EmbeddingItem]
    positives: list[int]  # bank row of each query's positive passage
    group_rows: dict[str, list[int]]  # group -> its passages' bank rows
    passages: torch.Tensor  # [P, d] the document sentence encoder's vectors of the bank, normalised
    anchors: torch.Tensor  # [Q, d] its vectors of "instruction + query", normalised

    def candidates(self, batch: list[int], bank_negatives: int, seed: str) -> tuple[list[int], list[int]]:
        """The bank rows a step ranks against and, per query, its positive's position among them:
        the batch's positives, every passage of the batch's groups, and a seeded bank sample."""
        rows = [self.positives[i] for i in batch]
        for i in batch:
            rows += self.group_rows.get(self.queries[i].group or "", [])
        if bank_negatives:
            sample = random.Random(seed).sample(range(len(self.passages)), min(bank_negatives, len(self.passages)))
            rows += sample
        unique = list(dict.fromkeys(rows))
        position = {row: n for n, row in enumerate(unique)}
        return unique, [position[self.positives[i]] for i in batch]


def load_data(
    texts_file: str, max_queries: int | None, sentence_encoder, embedding_dir: str | None, log=print
) -> RankingData:
    from ..teachers.cache import cached_embeddings
    from ..teachers.teacher import teacher_text

    items = read_items(texts_file)
    passages = [item for item in items if item.role == "passage"]
    row_of = {item.id: row for row, item in enumerate(passages)}
    queries = [item for item in items if item.role == "query" and item.positive in row_of]
    if max_queries is not None:
        queries = queries[:max_queries]
    if not queries:
        raise InstEmbError(
            f"{texts_file} holds no query whose positive passage is in the file: the two-tower recipe ranks "
            "each query's passage above the others. Build it with `instemb-rag build-distill-texts`."
        )
    group_rows: dict[str, list[int]] = {}
    for row, item in enumerate(passages):
        if item.group:
            group_rows.setdefault(item.group, []).append(row)
    folder = Path(embedding_dir) if embedding_dir else instemb_home() / "teacher_embeddings"
    started = time.perf_counter()
    passage_vectors = cached_embeddings(sentence_encoder.teacher, [item.text for item in passages], folder)
    anchor_vectors = cached_embeddings(
        sentence_encoder.teacher, [teacher_text(item.text, item.instruction) for item in queries], folder
    )
    log(
        f"document sentence encoder {sentence_encoder.name}: {len(passages)} passages and {len(queries)} query anchors ready "
        f"in {time.perf_counter() - started:.0f} s"
    )
    return RankingData(
        queries,
        [row_of[item.positive] for item in queries],
        group_rows,
        torch.as_tensor(passage_vectors, dtype=torch.float32),
        torch.as_tensor(anchor_vectors, dtype=torch.float32),
    )


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
            f"LLM-space document vectors: {self.done} passages embedded, {self.done / (time.perf_counter() - self.started):.1f}/s"
        )
        return vectors


def llm_half_name(reference: str) -> str:
    """The cache's label of a documents' LLM: ``llm-default`` or ``llm-<folder name>``."""
    return "llm-" + (Path(reference).name if reference not in ("", "default") else "default")


def cached_llm_vectors(
    encoder, reference: str, passages: list[str], embedding_dir: str | None, log=print
) -> torch.Tensor:
    from ..teachers.cache import cached_embeddings

    folder = Path(embedding_dir) if embedding_dir else instemb_home() / "teacher_embeddings"
    teacher = DocumentLLMAsTeacher(encoder, llm_half_name(reference), log)
    vectors = cached_embeddings(teacher, passages, folder, shard_rows=LLM_SHARD_ROWS)
    return torch.as_tensor(vectors, dtype=torch.float32)


QueryTowerData = RankingData  # alias kept for compatibility (issue 68 names round 2)
cached_llm_half = cached_llm_vectors  # alias kept for compatibility (issue 68 names round 2)
