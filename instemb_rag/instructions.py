"""The one rule for instructions: what counts as "no instruction", and one instruction per text.

``normalize_instruction`` is public (``from instemb_rag import normalize_instruction``): the
encoder, the shared-prefix path, the MTEB adapter and the LlamaIndex integration all apply it,
so "", whitespace and None mean the same everywhere.

A blank instruction ("" or whitespace) means **no instruction** at every entry point, never an
error: ``instemb-rag query --instruction ""``, ``/v1/search`` and ``/v1/embeddings`` with
``"instruction": ""``, ``Index.search(text, " ")``, and the LlamaIndex embedding and retriever
(where None means the model's ``query_instruction`` and "" means none) all embed the query as
if no instruction were given. A caller that builds the instruction from a possibly empty field
(a form, a shell variable) gets the plain query, which is what it asked for.
tests/test_shared_rules.py checks that every entry point agrees.

``DEFAULT_QUERY_INSTRUCTION`` is the instruction a query is embedded under when its caller gives
none: ``instemb-rag query`` without ``--instruction``, ``/v1/search`` and ``/v1/embeddings``
without ``instruction``, and the LlamaIndex integration's ``query_instruction``. It is None (no
instruction) because that is how the model is trained to read a plain question: MS MARCO's
question -> passage direction is trained without one (datasets/builders.py), and documents are
embedded without one on every path. One value for all three, so the same index and query rank
alike from the command line, the server and LlamaIndex.
"""

from __future__ import annotations

from collections.abc import Sequence

from .errors import InstEmbError

__all__ = [
    "DEFAULT_QUERY_INSTRUCTION",
    "Instructions",
    "normalize_instruction",
    "paste_instruction",
    "per_item_instructions",
]

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


def paste_instruction(text: str, instruction: str | None = None) -> str:
    """How a sentence encoder reads a text with its instruction: the instruction pasted in front
    (the encoder's sentence-encoder routes, ``pasted:`` models, and the teachers, whose
    ``teacher_text`` this is: one rule, below both)."""
    return f"{instruction} {text}" if instruction else text


def per_item_instructions(
    instructions: Instructions,
    count: int,
    field: str = "instructions",
    texts: str = "texts",
    default: str | None = None,
) -> list[str | None]:
    """One normalised instruction per text: from one string (or None) for all, or a list of ``count``.

    The one rule for "one instruction per text", used by the encoder, the server's
    /v1/embeddings and the LlamaIndex integration. A None (the whole argument or an item) means
    ``default`` (the caller's default instruction: None, or LlamaIndex's ``query_instruction``);
    every result goes through ``normalize_instruction``. ``field`` and ``texts`` name the two
    lists in the message a length mismatch raises."""
    if instructions is None or isinstance(instructions, str):
        return [normalize_instruction(default if instructions is None else instructions)] * count
    instructions = list(instructions)
    if len(instructions) != count:
        raise InstEmbError(
            f"Got {count} {texts} but {len(instructions)} {field}: give one instruction per text, "
            "a single string for all, or None."
        )
    return [normalize_instruction(default if item is None else item) for item in instructions]
