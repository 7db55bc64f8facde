"""How much text the encoder reads, and saying so when a text is longer.

The encoder reads at most ``max_length`` tokens per input: the prompt template, the instruction
and the look-ahead slots always fit, and the text is cut to what is left (template.py). A cut
text loses everything past that point without a word from the model, so two chunks that differ
only after it get the same vector. This module counts, with the encoder's own tokenizer and
template, how many tokens of text fit, and builds the warning an embedding call gives when a text
is cut (once per call, naming the longest text, its length and the limit, and the caller's advice:
the LlamaIndex integration's names its node parser).

Only a local encoder can count (a RemoteEncoder's server holds the tokenizer). Queries are
counted with the encoder's tokenizer, template and max_length, which is what ``encode_queries``
reads. Documents are counted on the encoder's document side (``encoder.document_side``,
instemb_rag/encoder/sides.py), whatever parts embed them (the LLM, a two-tower model's sentence
encoder, or both side by side): in the tokenizer of its most restrictive part, against that
part's ``token_limit`` (what ``instemb-rag index`` chunks to, the one way it is computed).
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from instemb_rag.errors import InstEmbError

# What LlamaIndex's SimpleDirectoryReader's default file_metadata adds to every document: tokens
# alike across a corpus that a framework embeds before each chunk's text unless told not to (the
# text is what instemb-rag embeds; the keys stay on the chunk for filters and citations).
FILE_METADATA_KEYS = (
    "file_path",
    "file_name",
    "file_type",
    "file_size",
    "creation_date",
    "last_modified_date",
    "last_accessed_date",
)


class TruncationWarning(UserWarning):
    """A text was longer than the encoder reads: its end was cut off before embedding."""


def can_count(encoder: Any) -> bool:
    """Whether the encoder is local (its tokenizers, template and document side are here to count with)."""
    return hasattr(encoder, "build_ids") and hasattr(encoder, "document_side")


def text_token_limit(encoder: Any, instruction: str | None) -> int:
    """Tokens of text the encoder reads under ``instruction``: max_length less the template, the
    instruction and the look-ahead slots."""
    return encoder.max_length - len(encoder.build_ids("", instruction))


def token_counts(encoder: Any, texts: Sequence[str]) -> list[int]:
    """Tokens of each text alone, as the template tokenizes it (no special tokens)."""
    if not texts:
        return []
    return [len(ids) for ids in encoder.tokenizer(list(texts), add_special_tokens=False).input_ids]


def document_tokenizer(encoder: Any) -> Any:
    """The tokenizer documents are counted (and chunked) in: the document side's."""
    return encoder.document_side.tokenizer


def document_token_limit(encoder: Any, instruction: str | None) -> int:
    """Tokens of a document's text the encoder's document side reads: its ``token_limit``, less a
    document instruction's own tokens where the side reads one (a side that reads none refuses it)."""
    side = encoder.document_side
    if instruction is None or not side.reads_instruction:
        return side.token_limit
    return side.token_limit - (side.tokens("", instruction) - side.tokens("", None))


def document_max_length(encoder: Any) -> int:
    """The whole window of the document side's most restrictive part (special tokens included)."""
    return encoder.document_side.max_length


def document_reader(encoder: Any) -> str:
    """What reads documents, for messages: the limiting part and its window."""
    name = encoder.document_side.limiting.name
    return f"{name}, max_length={document_max_length(encoder)} less its template and special tokens"


DOCUMENT_ADVICE = "Split documents into chunks of at most {limit} tokens, which the model reads whole."
QUERY_ADVICE = "Shorten the query (or its instruction)."


def warn_if_truncated(
    encoder: Any,
    texts: Sequence[str],
    instructions: Sequence[str | None],
    kind: str,
    document_advice: str = DOCUMENT_ADVICE,
) -> None:
    """One TruncationWarning for the call when any text is longer than the encoder reads;
    ``document_advice`` says what to do about a document ({limit}: the tokens it reads)."""
    if not texts or not can_count(encoder):
        return
    if kind == "document":
        counts, limit_of = encoder.document_side.text_tokens(texts), document_token_limit
    else:
        counts, limit_of = token_counts(encoder, texts), text_token_limit
    limits: dict[str | None, int] = {}
    cut = []
    for position, (count, instruction) in enumerate(zip(counts, instructions)):
        if instruction not in limits:
            limits[instruction] = limit_of(encoder, instruction)
        if count > limits[instruction]:
            cut.append((count - limits[instruction], count, limits[instruction], position))
    if not cut:
        return
    lost, count, limit, position = max(cut)
    start = " ".join(str(texts[position]).split())[:60]
    advice = document_advice.format(limit=limit) if kind == "document" else QUERY_ADVICE
    plural = {"document": "documents", "query": "queries"}[kind]
    if kind == "document":
        reader = f"what embeds documents: {document_reader(encoder)}"
    else:
        reader = f"max_length={encoder.max_length}, less the template, instruction and look-ahead tokens"
    warnings.warn(
        f"InstEmb reads at most {limit} tokens of a {kind} ({reader}); {len(cut)} of this "
        f"call's {len(texts)} {plural} {'was' if len(cut) == 1 else 'were'} longer and cut. The longest, "
        f"{kind} #{position} ({start!r}...), has {count} tokens: its last {lost} were not embedded. {advice}",
        TruncationWarning,
        stacklevel=_callers_stacklevel(),
    )


# Frames of these packages (and of the threads and event loops they run calls in) are skipped, so
# the warning points at the app's line that asked for the embeddings.
_LIBRARY_MODULES = ("llama_index", "llama_index_instrumentation", "instemb_rag", "asyncio", "threading", "concurrent")


def _callers_stacklevel() -> int:
    frame, level = sys._getframe(2), 2  # 1 is warn_if_truncated itself
    while frame is not None and frame.f_globals.get("__name__", "").split(".")[0] in _LIBRARY_MODULES:
        frame, level = frame.f_back, level + 1
    return level


def require_local(encoder: Any, what: str) -> None:
    """``what`` counts tokens: a RemoteEncoder (no tokenizer here) is refused, saying what to do."""
    if not can_count(encoder):
        raise InstEmbError(
            f"{what} needs the model's tokenizer, which a base_url embedding does not load. Use a local "
            "InstEmbEmbedding (same model) to build the node parser, or chunk with the server model's "
            "tokenizer to at most its document_token_limit (GET /v1/models gives it)."
        )


def chunk_settings(
    encoder: Any, instruction: str | None, chunk_size: int | None = None, chunk_overlap: int | None = None
) -> tuple[int, int, Callable[[str], list[int]]]:
    """(chunk size, overlap, the token ids of a text) to split documents as ``instemb-rag index``
    does, so that the document side reads each chunk whole: the size defaults to the CLI's (256) or
    the document limit if smaller, and one over the limit is refused; the overlap to the CLI's (32)
    or a quarter of a smaller chunk; tokens are the document side's most restrictive part's."""
    from ..index.documents import DEFAULT_CHUNK_SIZE
    from ..index.options import IndexOptions

    require_local(encoder, "Sizing chunks")
    limit = document_token_limit(encoder, instruction)
    chunk_size = min(DEFAULT_CHUNK_SIZE, limit) if chunk_size is None else chunk_size
    if chunk_size > limit:
        raise InstEmbError(
            f"chunk_size={chunk_size} is more than the {limit} tokens of a document the model reads "
            f"({document_reader(encoder)}): the end of longer chunks would be cut off. Use chunk_size <= {limit}."
        )
    overlap = min(IndexOptions.chunk_overlap, chunk_size // 4) if chunk_overlap is None else chunk_overlap
    tokenizer = document_tokenizer(encoder)
    return chunk_size, overlap, lambda text: tokenizer(text, add_special_tokens=False).input_ids
