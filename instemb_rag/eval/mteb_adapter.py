"""A thin MTEB model wrapper, so users with internet access can run MTEB, FollowIR and InstructIR.

mteb is *not* a dependency: nothing here imports it at module load. Usage::

    import mteb
    from instemb_rag import InstEmbEncoder
    from instemb_rag.eval.mteb_adapter import MTEBInstEmb
    model = MTEBInstEmb(InstEmbEncoder.from_pretrained())
    mteb.MTEB(tasks=mteb.get_tasks(tasks=["Core17InstructionRetrieval"])).run(model)

Which calls it answers
- mteb 1.x: ``encode(sentences, *, task_name, prompt_type=PromptType.query|passage, **kwargs)``.
  For instruction retrieval (FollowIR, InstructIR) mteb 1.x joins each query with its instruction
  through ``model.combine_query_and_instruction(query, instruction)`` when the model defines it.
  We join them with a separator character no real text contains and split them again in
  ``encode``, so the instruction reaches InstEmb's instruction slot instead of being glued onto
  the query text.
- mteb 2.x: ``encode(inputs: DataLoader, *, task_metadata, hf_split, hf_subset, prompt_type)``,
  whose batches are dicts with a ``text`` list and, for instruction tasks, an ``instruction`` list.
Queries get their own instruction, else ``query_instructions[task_name]``, else the default;
passages are embedded without an instruction (InstEmb's index-once design).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

import numpy as np

from ..encoder.protocol import LocalEncoder
from ..instructions import normalize_instruction
from .data import document_text

# U+241E SYMBOL FOR RECORD SEPARATOR: visible if it ever leaks, never present in benchmark text.
INSTRUCTION_SEPARATOR = "\u241e"


def _prompt_kind(prompt_type: Any) -> str | None:
    """'query' / 'document' from mteb's PromptType enum (or its string value) or None."""
    if prompt_type is None:
        return None
    value = str(getattr(prompt_type, "value", prompt_type)).lower()
    return "document" if value in {"passage", "document", "corpus"} else "query" if value == "query" else None


class MTEBInstEmb:
    """Wraps an :class:`InstEmbEncoder` with the methods MTEB calls."""

    def __init__(
        self,
        encoder: LocalEncoder,
        default_query_instruction: str | None = None,
        query_instructions: Mapping[str, str] | None = None,
        batch_size: int = 16,
        model_name: str = "instemb-rag",
    ):
        self.encoder = encoder
        self.default_query_instruction = default_query_instruction
        self.query_instructions = dict(query_instructions or {})
        self.batch_size = batch_size
        self.model_name = model_name

    # mteb 1.x hook for instruction-retrieval tasks
    def combine_query_and_instruction(self, query: str, instruction: str) -> str:
        if not instruction or not instruction.strip():
            return query
        return f"{query}{INSTRUCTION_SEPARATOR}{instruction}"

    def encode(
        self,
        sentences: Iterable[Any],
        *,
        task_name: str | None = None,
        task_metadata: Any = None,
        prompt_type: Any = None,
        **kwargs: Any,
    ) -> np.ndarray:
        if task_name is None and task_metadata is not None:
            task_name = getattr(task_metadata, "name", None)
        texts, instructions = self._texts_and_instructions(sentences)
        batch_size = int(kwargs.get("batch_size", self.batch_size))
        if _prompt_kind(prompt_type) == "document":
            return self._encode_documents(texts, instructions, batch_size)
        fallback = self.query_instructions.get(task_name or "", self.default_query_instruction)
        per_query = [own or fallback for own in instructions]
        return self.encoder.encode_queries(texts, per_query, batch_size=batch_size)

    def _encode_documents(self, texts, instructions, batch_size) -> np.ndarray:
        if any(instructions):  # a task that asks for instructed passages gets them, item by item
            return self.encoder.encode(texts, instructions, batch_size=batch_size)
        return self.encoder.encode_documents(texts, batch_size=batch_size)

    @staticmethod
    def _texts_and_instructions(sentences: Iterable[Any]) -> tuple[list[str], list[str | None]]:
        """Flatten mteb 1.x strings or mteb 2.x dict batches into texts + optional instructions."""
        texts: list[str] = []
        instructions: list[str | None] = []
        for item in sentences:
            if isinstance(item, str):
                _append(texts, instructions, item, None)
            elif isinstance(item, Mapping) and isinstance(item.get("text"), str):
                # one corpus record {"title", "text"} (mteb 1.x corpus encoding)
                _append(texts, instructions, document_text(item.get("title"), item["text"]), item.get("instruction"))
            elif isinstance(item, Mapping):  # an mteb 2.x batch: columns of equal length
                batch_texts = list(item.get("text") or item.get("query") or [])
                batch_instructions = list(item.get("instruction") or [None] * len(batch_texts))
                for text, instruction in zip(batch_texts, batch_instructions, strict=True):
                    _append(texts, instructions, text, instruction)
            else:
                raise TypeError(f"MTEBInstEmb.encode got a {type(item).__name__}; expected strings or dict batches.")
        return texts, instructions


def _append(texts: list[str], instructions: list[str | None], text: str, instruction: str | None) -> None:
    if INSTRUCTION_SEPARATOR in text:
        text, _, joined_instruction = text.partition(INSTRUCTION_SEPARATOR)
        instruction = instruction or joined_instruction
    texts.append(text)
    instructions.append(normalize_instruction(instruction))
