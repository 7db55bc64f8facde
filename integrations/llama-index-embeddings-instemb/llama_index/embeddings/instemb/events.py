"""What an embedding call tells LlamaIndex's observability: the instruction travels with it.

Every call (queries, documents) is reported once on both of LlamaIndex's channels: the
instrumentation dispatcher (``InstructionEmbeddingStartEvent``, an ``EmbeddingStartEvent`` with
``input_type`` and one ``instructions`` entry per text, then ``EmbeddingEndEvent``) and the callback
manager (a ``CBEventType.EMBEDDING`` event whose start payload holds the model payload and the
instructions, and whose end payload the chunks and embeddings, as LlamaIndex's own embeddings do).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Literal

import llama_index.core.instrumentation as instrument
from llama_index.core.callbacks import CallbackManager, CBEventType, EventPayload
from llama_index.core.instrumentation.events.embedding import EmbeddingEndEvent, EmbeddingStartEvent

dispatcher = instrument.get_dispatcher(__name__)

INSTRUCTIONS_KEY = "instructions"  # the callback payload's key (EventPayload has none for it)
InputType = Literal["query", "document"]


class InstructionEmbeddingStartEvent(EmbeddingStartEvent):
    """An embedding call: which side (query or document) and the instruction of each text."""

    input_type: InputType
    instructions: list[str | None]

    @classmethod
    def class_name(cls) -> str:
        return "InstructionEmbeddingStartEvent"


class EmbeddingCall:
    vectors: list[list[float]] | None = None  # what the body of ``embedding_call`` computed


@contextmanager
def embedding_call(
    callback_manager: CallbackManager,
    model_payload: dict[str, Any],
    texts: Sequence[str],
    instructions: list[str | None],
    input_type: InputType,
) -> Iterator[EmbeddingCall]:
    """Report one embedding call: start events, the body (sets ``call.vectors``), end events."""
    payload = {**model_payload, "input_type": input_type, INSTRUCTIONS_KEY: instructions}
    dispatcher.event(
        InstructionEmbeddingStartEvent(model_dict=payload, input_type=input_type, instructions=instructions)
    )
    call, chunks = EmbeddingCall(), [str(text) for text in texts]  # plain strings, whatever str subclass came in
    start = {EventPayload.SERIALIZED: payload, INSTRUCTIONS_KEY: instructions}
    with callback_manager.event(CBEventType.EMBEDDING, payload=start) as event:
        yield call
        event.on_end(payload={EventPayload.CHUNKS: chunks, EventPayload.EMBEDDINGS: call.vectors})
    dispatcher.event(EmbeddingEndEvent(chunks=chunks, embeddings=call.vectors or []))
