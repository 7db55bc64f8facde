"""The query tower's data: queries with their positive passage, the passage bank, its vectors.

From one embedding-items file (datasets/embedding_items.py, built by ``build-distill-texts``):
each query with a positive is a training query; every passage is in the bank, embedded once by
the frozen document tower and cached on disk by its fingerprint and text (teachers/cache.py); a
query's group names its hard negatives (the group's other passages).
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from ...datasets.embedding_items import EmbeddingItem, read_items
from ...errors import InstEmbError
from ...paths import instemb_home


@dataclass
class QueryTowerData:
    queries: list[EmbeddingItem]
    positives: list[int]  # bank row of each query's positive passage
    group_rows: dict[str, list[int]]  # group -> its passages' bank rows
    passages: torch.Tensor  # [P, d] the document tower's vectors of the bank, normalised
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


def load_data(texts_file: str, max_queries: int | None, tower, embedding_dir: str | None, log=print) -> QueryTowerData:
    from ...teachers.cache import cached_embeddings
    from ...teachers.teacher import teacher_text

    items = read_items(texts_file)
    passages = [item for item in items if item.role == "passage"]
    row_of = {item.id: row for row, item in enumerate(passages)}
    queries = [item for item in items if item.role == "query" and item.positive in row_of]
    if max_queries is not None:
        queries = queries[:max_queries]
    if not queries:
        raise InstEmbError(
            f"{texts_file} holds no query whose positive passage is in the file: the query tower ranks "
            "each query's passage above the others. Build it with `instemb-rag build-distill-texts`."
        )
    group_rows: dict[str, list[int]] = {}
    for row, item in enumerate(passages):
        if item.group:
            group_rows.setdefault(item.group, []).append(row)
    folder = Path(embedding_dir) if embedding_dir else instemb_home() / "teacher_embeddings"
    started = time.perf_counter()
    passage_vectors = cached_embeddings(tower.sentence_encoder, [item.text for item in passages], folder)
    anchor_vectors = cached_embeddings(
        tower.sentence_encoder, [teacher_text(item.text, item.instruction) for item in queries], folder
    )
    log(
        f"document tower {tower.name}: {len(passages)} passages and {len(queries)} query anchors ready "
        f"in {time.perf_counter() - started:.0f} s"
    )
    return QueryTowerData(
        queries,
        [row_of[item.positive] for item in queries],
        group_rows,
        torch.as_tensor(passage_vectors, dtype=torch.float32),
        torch.as_tensor(anchor_vectors, dtype=torch.float32),
    )
