"""What embeds documents, as every entry point asks for it: ``encoder.document_side``.

An encoder is made of parts; its document side is the parts that embed documents (the LLM of a
symmetric encoder, the sentence encoder of a two-tower one, both for two spaces). Chunking, the
token limit, usage counting, the model card, the index's fingerprint check and the refusal of a
document instruction all read it here, so no entry point needs to know which kind it holds.

    tokenizer      what chunks are counted in: the tokenizer of the most restrictive part
    token_limit    tokens of document text that part reads (the rest is cut)
    max_length     that part's whole window (special tokens and template included)
    tokens(text)   tokens the document side runs for one text, over all its parts (usage)
    fingerprint    identifies the stored vectors: an index keys on it
    reads_instruction  False where a sentence encoder embeds documents: a document
                   instruction would be ignored, so it is refused
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from .combine import refuse_document_instruction

__all__ = ["DocumentPart", "DocumentSide", "llm_part", "refuse_document_instruction", "sentence_encoder_part"]


@dataclass(frozen=True)
class DocumentPart:
    """One part that embeds documents: its name (for messages), tokenizer and limits."""

    name: str
    tokenizer: Any
    token_limit: int  # document-text tokens it reads
    max_length: int  # its whole window
    count: Callable[[str], int]  # tokens it runs for one document (special tokens, template)
    reads_instruction: bool


@dataclass(frozen=True)
class DocumentSide:
    parts: tuple[DocumentPart, ...]
    fingerprint: str

    @property
    def limiting(self) -> DocumentPart:
        """The part that reads the fewest document tokens: chunks are sized for it."""
        return min(self.parts, key=lambda part: part.token_limit)

    @property
    def tokenizer(self) -> Any:
        return self.limiting.tokenizer

    @property
    def token_limit(self) -> int:
        return self.limiting.token_limit

    @property
    def max_length(self) -> int:
        return self.limiting.max_length

    @property
    def reads_instruction(self) -> bool:
        return all(part.reads_instruction for part in self.parts)

    @property
    def description(self) -> str:
        return " + ".join(part.name for part in self.parts)

    def tokens(self, text: str, instruction: str | None = None) -> int:
        """Tokens run to embed one document, summed over the parts (what the server bills)."""
        return sum(part.count(text, instruction) for part in self.parts)

    def text_tokens(self, texts: Sequence[str]) -> list[int]:
        """Each text's own tokens in the limiting part's tokenizer (no special tokens)."""
        if not texts:
            return []
        return [len(ids) for ids in self.tokenizer(list(texts), add_special_tokens=False).input_ids]

    def refuse_instruction(self, instruction: str | None) -> None:
        if not self.reads_instruction:
            refuse_document_instruction(instruction, self.description)


def llm_part(encoder, name: str = "the LLM") -> DocumentPart:
    """A symmetric InstEmb encoder's documents: its own tokenizer, its window less the template's
    own tokens (an empty document's ids, look-ahead tokens included)."""
    overhead = len(encoder.build_ids("", None))
    return DocumentPart(
        name,
        encoder.tokenizer,
        encoder.max_length - overhead,
        encoder.max_length,
        lambda text, instruction=None: len(encoder.build_ids(text, instruction)),
        True,
    )


def sentence_encoder_part(sentence_encoder) -> DocumentPart:
    """A sentence encoder's documents (encoder/modules/sentence_encoder.py): its window less its
    special tokens ([CLS] and [SEP])."""
    overhead = sentence_encoder.tokens("")
    return DocumentPart(
        sentence_encoder.reference,
        sentence_encoder.tokenizer,
        sentence_encoder.max_length - overhead,
        sentence_encoder.max_length,
        lambda text, instruction=None: sentence_encoder.tokens(text),
        False,
    )
