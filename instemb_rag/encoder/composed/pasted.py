"""The two-tower anchor: a sentence encoder on both sides, the instruction pasted before the query
(``pasted:`` references, resolved by encoder/load.py).

What a user could build in ten minutes with the document sentence encoder alone (issue 44): documents by
the sentence encoder, each query as ``instruction + " " + query`` (instructions.paste_instruction) by the
same encoder. Every eval task takes it as ``--model pasted:NAME`` (NAME: an installed teacher
such as ``minilm``, or a sentence-transformers folder), so the two-tower query LLM is compared with it on
the same items, pairable with ``instemb-rag compare``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...instructions import Instructions, paste_instruction, per_item_instructions
from ..modules.sentence_encoder import SentenceEncoder

PREFIX = "pasted:"


def is_pasted_reference(model: str | None) -> bool:
    return bool(model) and str(model).startswith(PREFIX)


class PastedInstructionEncoder:
    """The Encoder protocol over one sentence encoder: the instruction pasted in front of the query."""

    def __init__(self, sentence_encoder: SentenceEncoder):
        self.sentence_encoder = sentence_encoder
        self.training_info: dict = {}

    @classmethod
    def load(cls, model: str, device: str = "cpu") -> PastedInstructionEncoder:
        reference = model[len(PREFIX) :] if is_pasted_reference(model) else model
        return cls(SentenceEncoder.load(SentenceEncoder.recorded_reference(reference), device=device))

    @property
    def fingerprint(self) -> str:
        return f"pasted-{self.sentence_encoder.fingerprint[:24]}"

    @property
    def document_fingerprint(self) -> str:
        return self.sentence_encoder.fingerprint

    @property
    def dimension(self) -> int:
        return self.sentence_encoder.dimension

    @property
    def label(self) -> str:
        return f"{self.sentence_encoder.name}, instruction pasted"

    def encode_queries(self, queries: Sequence[str], instructions: Instructions = None, **kwargs) -> np.ndarray:

        queries = list(queries)
        per_item = per_item_instructions(instructions, len(queries))
        texts = [paste_instruction(query, instruction) for query, instruction in zip(queries, per_item)]
        return self.sentence_encoder.encode(texts, batch_size=kwargs.get("batch_size", 64))

    def encode_documents(self, documents: Sequence[str], instruction: str | None = None, **kwargs) -> np.ndarray:

        texts = [paste_instruction(document, instruction) for document in documents]
        return self.sentence_encoder.encode(texts, batch_size=kwargs.get("batch_size", 64))
