"""A search hit (``SearchHit``), in a module of its own: the CLI's client of the resident query
process builds hits from its answer without loading the search code (faiss, numpy)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

__all__ = ["SearchHit"]


@dataclass
class SearchHit:
    score: float
    source: str
    position: int
    text: str
    chunk_id: int
    extra: dict
    dense_rank: int | None = None  # hybrid search: this chunk's rank on each side (None: beyond
    lexical_rank: int | None = None  # that side's candidates, or no query word in it)
    dense_score: float | None = None  # hybrid search: each side's exact score, as fused (the cosine;
    lexical_score: float | None = None  # bm25, 0 = no query word); explain shows them, to_dict does not

    def to_dict(self) -> dict:
        found = asdict(self)
        del found["dense_score"], found["lexical_score"]
        if self.dense_rank is None and self.lexical_rank is None:  # dense search: the fields it always had
            del found["dense_rank"], found["lexical_rank"]
        return found
