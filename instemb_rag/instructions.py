"""The one rule for instructions: what counts as "no instruction", and one instruction per text.

``normalize_instruction`` is public (``from instemb_rag import normalize_instruction``): the
encoder, the shared-prefix path, the MTEB adapter and the LlamaIndex integration all apply it,
so "", whitespace and None mean the same everywhere.

``DEFAULT_QUERY_INSTRUCTION`` is the instruction a query is embedded under when its caller gives
none: ``instemb-rag query`` without ``--instruction``, ``/v1/search`` and ``/v1/embeddings``
without ``instruction``, and the LlamaIndex integration's ``query_instruction``. It is None (no
instruction) because that is how the model is trained to read a plain question: MS MARCO's
question -> passage direction is trained without one (training/builders.py), and documents are
embedded without one on every path. One value for all three, so the same index and query rank
alike from the command line, the server and LlamaIndex.
"""

from __future__ import annotations

from collections.abc import Sequence

from .errors import InstEmbError

__all__ = ["DEFAULT_QUERY_INSTRUCTION", "Instructions", "normalize_instruction", "per_item_instructions"]

Instructions = str | Sequence[str | None] | None

DEFAULT_QUERY_INSTRUCTION: str | None = None


def normalize_instruction(instruction: str | None) -> str | None:
    """None, "" and whitespace-only mean no instruction (None); any other string is used as given."""
    if instruction is None:
        return None
    if not isinstance(instruction, str):
        raise InstEmbError(
            f"An instruction must be a string or None, not {type(instruction).__name__} ({instruction!r})."
        )
    return instruction if instruction.strip() else None


def per_item_instructions(instructions: Instructions, count: int, field: str = "instructions") -> list[str | None]:
    """One normalised instruction per text: from one string (or None) for all, or a list of ``count``."""
    if instructions is None or isinstance(instructions, str):
        return [normalize_instruction(instructions)] * count
    instructions = list(instructions)
    if len(instructions) != count:
        raise InstEmbError(
            f"Got {count} texts but {len(instructions)} {field}: give one instruction per text, "
            "a single string for all, or None."
        )
    return [normalize_instruction(item) for item in instructions]
