"""Two whole encoders side by side at a fixed weight (issue 44's next lever): ``concat:`` references.

A query is ``[sqrt(w) * A(query) ; sqrt(1 - w) * B(query)]`` and a document likewise, each part
L2-normalised (encoder/combine.py ``side_by_side``), so the cosine of the whole is ``w * cos_A + (1 - w) * cos_B``: for example a
two-tower model (documents by its sentence encoder, queries by its query LLM) beside the symmetric default (documents
by the LLM), which brings the LLM's document geometry back where a sentence encoder lacks it, at
the LLM's indexing cost for that half. Every eval task takes it as ``--model concat:A,B`` (equal
weights) or ``--model concat:0.7:A,B`` (w = 0.7 for A); A and B as ``--model`` takes them
(encoder/load.py resolves the reference and each side).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence

import numpy as np

from ...errors import InstEmbError
from ...instructions import Instructions
from ..combine import side_by_side

PREFIX = "concat:"


def is_concatenated_reference(model: str | None) -> bool:
    return bool(model) and str(model).startswith(PREFIX)


def parse_reference(model: str) -> tuple[float, list[str]]:
    """(w, [A, B]) of ``concat:[w:]A,B``."""
    body = model[len(PREFIX) :]
    weight = 0.5
    head, _, rest = body.partition(":")
    try:
        weight, body = float(head), rest
    except ValueError:
        pass
    parts = [part for part in body.split(",") if part]
    if len(parts) != 2 or not 0.0 < weight < 1.0:
        raise InstEmbError(
            f"--model {model!r}: write concat:A,B or concat:W:A,B with two models and 0 < W < 1 "
            "(for example concat:0.5:runs/two-tower/final,default)."
        )
    return weight, parts


class ConcatenatedEncoder:
    """The Encoder protocol over two encoders, their normalised embeddings weighted side by side."""

    def __init__(self, first, second, weight: float = 0.5):
        self.parts = (first, second)
        self.weight = weight
        self.training_info: dict = {}

    @classmethod
    def load(cls, model: str, load: Callable[[str | None], object]) -> ConcatenatedEncoder:
        weight, (first, second) = parse_reference(model)
        return cls(*(load(None if name == "default" else name) for name in (first, second)), weight)

    def _identity(self, name: str) -> str:
        digest = hashlib.sha256(f"concat:{self.weight}".encode())
        for encoder in self.parts:
            digest.update(getattr(encoder, name).encode())
        return digest.hexdigest()[:32]

    @property
    def fingerprint(self) -> str:
        return self._identity("fingerprint")

    @property
    def document_fingerprint(self) -> str:
        return self._identity("document_fingerprint")

    @property
    def dimension(self) -> int:
        return sum(encoder.dimension for encoder in self.parts)

    @property
    def label(self) -> str:
        return f"concatenated (w={self.weight:g})"

    def _side_by_side(self, embed) -> np.ndarray:
        first, second = (np.asarray(embed(encoder), dtype=np.float32) for encoder in self.parts)
        return side_by_side(first, second, self.weight)

    def encode_queries(self, queries: Sequence[str], instructions: Instructions = None, **kwargs) -> np.ndarray:
        return self._side_by_side(lambda encoder: encoder.encode_queries(list(queries), instructions, **kwargs))

    def encode_documents(self, documents: Sequence[str], instruction: str | None = None, **kwargs) -> np.ndarray:
        return self._side_by_side(lambda encoder: encoder.encode_documents(list(documents), instruction, **kwargs))
