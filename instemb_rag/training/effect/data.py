"""The effect trainer's data: each query's cached vectors, its positive and hard negatives.

The queries with an instruction and every passage of one embedding-items file
(datasets/embedding_items.py); their vectors come from the cache (vectors.py). A seeded share of
the queries is held out for the run's own validation metric (never the dev figures: those are
scored on items no training record read).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch

from ...datasets.embedding_items import read_items
from ...errors import InstEmbError
from ..cached_vectors import RankingData
from .vectors import cache_effect_vectors


@dataclass
class EffectData:
    queries: RankingData  # items, positives, groups; the sentence encoder's passages and queries
    llm_passages: torch.Tensor  # [P, d] D(d), normalised
    llm_queries: torch.Tensor  # [Q, d] D(q, i)
    llm_references: torch.Tensor  # [Q, d] D(q, r)
    training_rows: list[int]  # the queries that train
    validation_rows: list[int]  # the queries held out


def no_training_queries(texts_file) -> InstEmbError:
    """The error for an items file the effect trainers cannot train on: what it must hold, and how
    a user without the checkout's research scripts makes one."""
    return InstEmbError(
        f"{texts_file} holds no query with an instruction whose positive passage is in the file: the "
        "effect trainer ranks each such query's positive passage above the others. effect.texts_file is "
        "an embedding-items file, one JSON object a line (id, role 'query' or 'passage', text, "
        "instruction, group, positive): queries under an instruction, each naming its positive "
        "passage's id, and the passages (a group's passages are each other's hard negatives). "
        "`instemb-rag build-distill-texts` writes one (the trainer reads the queries that have both); "
        "the docs' instruction-effect page, under 'Training the effect map', says more."
    )


def load_effect_data(
    texts_file: str,
    max_queries,
    validation_share: float,
    seed: int,
    embedding_dir=None,
    llm=None,
    sentence_encoder=None,
    log=print,
) -> EffectData:
    items = read_items(texts_file)
    passages = [item for item in items if item.role == "passage"]
    row_of = {item.id: row for row, item in enumerate(passages)}
    queries = [item for item in items if item.role == "query" and item.instruction and item.positive in row_of]
    if max_queries is not None:
        queries = queries[:max_queries]
    if not queries:
        raise no_training_queries(texts_file)
    vectors = cache_effect_vectors(queries + passages, embedding_dir, llm, sentence_encoder, log)
    group_rows: dict[str, list[int]] = {}
    for row, item in enumerate(passages):
        if item.group:
            group_rows.setdefault(item.group, []).append(row)
    ranking = RankingData(
        queries,
        [row_of[item.positive] for item in queries],
        group_rows,
        vectors["sentence_encoder_passages"],
        vectors["sentence_encoder_queries"],
    )
    rows = list(range(len(queries)))
    random.Random(f"{seed}:validation").shuffle(rows)
    held = round(len(rows) * validation_share)
    return EffectData(
        ranking,
        vectors["llm_passages"],
        vectors["llm_queries"],
        vectors["llm_references"],
        sorted(rows[held:]),
        sorted(rows[:held]),
    )
