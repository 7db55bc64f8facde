"""The two-tower side of an InstEmbEncoder: documents by a sentence encoder (its document tower,
modules/document_tower.py), queries by the LLM into that space, anchored or not.

``TwoTowerSide`` holds the encoder's methods that differ between a symmetric encoder (no
document tower: the LLM embeds both) and a two-tower one; InstEmbEncoder (model.py) inherits
them, so they are its public methods as before. Nothing here imports the model.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ..errors import InstEmbError
from ..instructions import Instructions, normalize_instruction, per_item_instructions
from . import quantize

__all__ = ["TwoTowerSide", "check_tower_head"]


def check_tower_head(projection, document_tower) -> None:
    """A two-tower encoder's queries land in the tower's space: it needs a head of that width."""
    if document_tower is not None and (projection is None or projection.dimension != document_tower.dimension):
        raise InstEmbError(
            f"A two-tower encoder needs a projection head (unblended) into its document tower's "
            f"{document_tower.dimension}-dimensional space; this one has "
            f"{'none' if projection is None else f'a {projection.dimension}-dimensional output'}."
        )


def _anchored(encoder) -> bool:
    """A query is the tower's vector of "instruction + query" plus the LLM's correction."""
    return encoder.document_tower is not None and encoder.document_tower.query_anchor


class TwoTowerSide:
    """The two-tower methods of InstEmbEncoder (``self`` is one: ``document_tower``, ``encode``...)."""

    takes_llm_weight = False  # one space per side: no query-time mix weight (protocol.takes_llm_weight)

    @property
    def is_two_tower(self) -> bool:
        """Documents embedded by a sentence encoder (the document tower), queries by the LLM."""
        return self.document_tower is not None

    @property
    def document_fingerprint(self) -> str:
        """What decides document vectors (the document tower's, else the whole encoder's): an index
        keys on it, so a new query tower into the same document space searches it as it is."""
        return self.document_tower.fingerprint if self.document_tower is not None else self.fingerprint

    def document_tower_config(self) -> dict | None:
        """The config entry of the document tower (None: symmetric). A folder tower is recorded as
        the checkpoint's ``document_tower/`` (a save copies it there), never an absolute path, so
        the fingerprint is the same before a save, after it and wherever the checkpoint moves."""
        from .checkpoint import TOWER_DIR

        if self.document_tower is None:
            return None
        config = self.document_tower.get_config_dict()
        return config if self.document_tower.is_named_teacher else {**config, "encoder": TOWER_DIR}

    def with_document_tower(self, document_tower):
        """This encoder with a document tower (two-tower) or none (symmetric): another fingerprint."""
        if self.precision != quantize.DEFAULT_PRECISION:
            raise InstEmbError("with_document_tower is for fp32 encoders; load the checkpoint at its precision.")
        return self._view(self.settings, self.projection, document_tower)

    def to(self, *args, **kwargs):
        """``nn.Module.to``; a two-tower encoder's document tower goes where the encoder now is (a
        dtype change is not passed on: the sentence encoder keeps its own)."""
        moved = super().to(*args, **kwargs)
        if self.document_tower is not None:
            self.document_tower.to(self.device)
        return moved

    def query_tokens(self, query: str, instruction: str | None) -> int:
        """Tokens one query runs through: the LLM's prefill, and an anchored tower's own pass."""
        tokens = len(self.build_ids(query, instruction))
        if _anchored(self):
            from ..teachers.teacher import teacher_text

            tokens += self.document_tower.tokens(teacher_text(query, instruction))
        return tokens

    @property
    def document_side(self):
        """What embeds documents (sides.py): this LLM, or the two-tower encoder's sentence encoder."""
        from .sides import DocumentSide, llm_part, tower_part

        part = tower_part(self.document_tower) if self.document_tower is not None else llm_part(self)
        return DocumentSide((part,), self.document_fingerprint)

    def encode_queries(self, queries: Sequence[str], instructions: Instructions = None, **kwargs) -> np.ndarray:
        """One instruction per query (or one string for all, or None); one batched call.

        An anchored two-tower query is the document tower's vector of "instruction + query" plus
        the LLM tower's (un-normalised) output, normalised (document_tower.py)."""
        if not _anchored(self):
            return self.encode(queries, instructions, **kwargs)
        queries = list(queries)
        correction = self.encode_unnormalised(queries, instructions, **kwargs)
        return self.document_tower.anchored_queries(
            queries, per_item_instructions(instructions, len(queries)), correction
        )

    def route_queries(self, pooled, anchors):
        """(queries, corrections) of an anchored two-tower from pooled states [B, hidden] and the
        tower's anchors [B, d]: the query route, at inference and in training (training/query_tower/)."""
        from .combine import anchored

        corrections = self.project(pooled)
        return anchored(anchors, corrections), corrections

    def encode_documents(self, documents: Sequence[str], instruction: str | None = None, **kwargs) -> np.ndarray:
        """Documents are embedded once, under one optional instruction (symmetric mode), or by the
        document tower with none (two-tower mode: an instruction is refused)."""
        if self.document_tower is None:
            return self.encode(documents, instruction, **kwargs)
        return self.document_tower.encode_documents(documents, instruction, **kwargs)

    def encode_instructions(self, text: str, instructions: Sequence[str | None], batch_size: int = 32) -> np.ndarray:
        """One text under K instructions [K, d]: the text's key/value cache is computed once.

        Equals ``encode_queries([text] * K, instructions)``; see instemb_rag/encoder/fast/shared_prefix.py.
        """
        from .fast.shared_prefix import encode_instructions

        if not _anchored(self):
            return encode_instructions(self, text, instructions, batch_size=batch_size)
        correction = encode_instructions(self, text, instructions, batch_size=batch_size, normalise=False)
        per_item = [normalize_instruction(instruction) for instruction in instructions]
        return self.document_tower.anchored_queries([text] * len(per_item), per_item, correction)
