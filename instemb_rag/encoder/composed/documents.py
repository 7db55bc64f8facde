"""What every encoder of parts shares: the two-space document side and the LLM that reads queries.

Documents: ``[A; B] / sqrt(2)``, A the documents' LLM's own vector (a symmetric InstEmb encoder,
frozen), B a sentence encoder's (the document tower), each normalised. The document fingerprint
covers those two parts only, so every arrangement over the same two (the two-space mix, the
instruction's effect) searches the same index as it is. The query side's LLM (its tokenizer,
template, token limit) is what the server and the indexer's usage counts see.
"""

from __future__ import annotations

import hashlib
from typing import Sequence

import numpy as np
import torch

from ..combine import ROOT2, document_halves
from ..sides import DocumentSide, llm_part, tower_part

__all__ = ["ROOT2", "TwoSpaceParts"]


class TwoSpaceParts:
    """Set by the subclass: ``documents_llm``, ``query_llm`` (maybe the same object), ``tower``."""

    documents_llm: object
    query_llm: object
    tower: object

    # ------------------------------------------------------------------ the document side
    @property
    def has_query_llm(self) -> bool:
        return self.query_llm is not self.documents_llm

    @property
    def document_fingerprint(self) -> str:
        digest = hashlib.sha256(b"two_spaces/1")
        digest.update(self.documents_llm.fingerprint.encode())
        digest.update(self.tower.fingerprint.encode())
        return digest.hexdigest()[:32]

    @property
    def llm_dimension(self) -> int:
        return self.documents_llm.dimension

    @property
    def dimension(self) -> int:
        return self.llm_dimension + self.tower.dimension

    @property
    def document_side(self) -> DocumentSide:
        return DocumentSide((llm_part(self.documents_llm), tower_part(self.tower)), self.document_fingerprint)

    def document_halves(
        self, documents: Sequence[str], batch_size: int = 16, show_progress: bool = False
    ) -> tuple[np.ndarray, np.ndarray]:
        """(A, B): each document's LLM and sentence-encoder vectors, each normalised."""
        documents = list(documents)
        llm = self.documents_llm.encode_documents(documents, None, batch_size=batch_size, show_progress=show_progress)
        return llm, self.tower.encode_documents(documents, None, batch_size=max(batch_size, 32))

    def encode_documents(self, documents: Sequence[str], instruction: str | None = None, **kwargs) -> np.ndarray:
        """``[A; B] / sqrt(2)`` per document; a document instruction is refused (the tower reads none)."""
        self.document_side.refuse_instruction(instruction)
        llm, tower = self.document_halves(documents, kwargs.get("batch_size", 16), kwargs.get("show_progress", False))
        return document_halves(llm, tower)

    # ------------------------------------------------------------------ the query side's LLM (LocalEncoder)
    @property
    def tokenizer(self):
        return self.query_llm.tokenizer

    @property
    def template(self):
        return self.query_llm.template

    @property
    def settings(self):
        return self.query_llm.settings

    @property
    def max_length(self) -> int:
        return self.query_llm.max_length

    @property
    def precision(self) -> str:
        return self.query_llm.precision

    @property
    def backbone(self):
        return self.query_llm.backbone

    @property
    def device(self) -> torch.device:
        return self.query_llm.device

    def build_ids(self, text: str, instruction: str | None, lookahead_length: int | None = None) -> list[int]:
        return self.query_llm.build_ids(text, instruction, lookahead_length)

    def encode(
        self, texts: Sequence[str], instructions=None, batch_size: int = 16, show_progress: bool = False
    ) -> np.ndarray:
        """Texts each under its own instruction, embedded as queries are."""
        return self.encode_queries(texts, instructions, batch_size=batch_size, show_progress=show_progress)

    def encode_instructions(self, text: str, instructions: Sequence[str | None], batch_size: int = 32) -> np.ndarray:
        """One text under K instructions [K, d] (equals ``encode_queries([text] * K, instructions)``)."""
        return self.encode_queries([text] * len(instructions), list(instructions), batch_size=batch_size)
