"""The two-space trainer's data: the two-tower recipe's queries and passages, plus the documents' LLM-space vectors.

Both spaces' document vectors of every passage are embedded once and cached on disk (cached_vectors.py),
each keyed on what made it: the sentence encoder's fingerprint, the documents' LLM's document
fingerprint.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from ...datasets.embedding_items import read_items
from ..cached_vectors import RankingData, cached_llm_vectors, load_data


@dataclass
class TwoSpacesData:
    ranking: RankingData  # queries, positives, groups, the sentence encoder's vectors of passages, the anchors
    llm_passages: torch.Tensor  # [P, d_llm] the LLM-space vectors of the same passages, normalised


def load_two_spaces_data(texts_file, max_queries, sentence_encoder, documents_llm, reference, embedding_dir, log=print):
    ranking = load_data(texts_file, max_queries, sentence_encoder, embedding_dir, log)
    passages = [item.text for item in read_items(texts_file) if item.role == "passage"]
    started = time.perf_counter()
    llm_passages = cached_llm_vectors(documents_llm, reference, passages, embedding_dir, log)
    log(f"LLM-space document vectors: {len(passages)} passages ready in {time.perf_counter() - started:.0f} s")
    return TwoSpacesData(ranking, llm_passages)
