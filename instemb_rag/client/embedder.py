"""Embedder: an encoder as an application embeds through it, whatever the framework around it.

    embedder = Embedder(encoder, query_cache_size=1024, document_store=None, document_instruction=None)
    queries, instructions, knobs = embedder.query_inputs(["Which tent?"], "focus on weight", None, [{}])
    embedder.embed_queries(queries, instructions, knobs, batch_size=16)
    embedder.embed_documents(embedder.document_inputs(["The Ridgeline 2 weighs ..."]), batch_size=16)

The encoder is local (an ``InstEmbEncoder`` or any ``LocalEncoder``) or a ``RemoteEncoder``
(remote.py). Local: one forward pass at a time (a lock, so threads and event loops may share it);
remote: the server batches concurrent requests itself. Query embeddings are kept in an LRU keyed
on the encoder's fingerprint, the instruction, the text and the knobs; document embeddings, given
a key-value store, on the document side's fingerprint, the document instruction and the text
(caches.py). A text longer than the encoder reads gives one TruncationWarning per call (limits.py).

The inputs enter through ``query_inputs`` and ``document_inputs`` (texts checked by
queries.check_texts, instructions normalised, knobs in range and taken by the model); documents
are read under the one document instruction the embedder was made with (refused here by a local
document side that reads none; a server's refuses it itself). Vectors are lists of floats.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Mapping, Sequence
from functools import partial
from typing import Any

from ..instructions import Instructions, normalize_instruction, per_item_instructions
from ..queries import QueryKnobs, check_texts
from .caches import DocumentEmbeddingCache, QueryEmbeddingCache, QueryKey
from .carried import knobs_of
from .limits import DOCUMENT_ADVICE, can_count, chunk_settings, document_token_limit, require_local, warn_if_truncated

__all__ = ["Embedder"]

Vector = list[float]


class Embedder:
    """An encoder behind one lock, with its query and document caches (see the module docstring)."""

    def __init__(
        self,
        encoder: Any,
        query_cache_size: int = 1024,
        document_store: Any = None,
        remote: bool = False,
        document_advice: str = DOCUMENT_ADVICE,
        document_instruction: str | None = None,
    ):
        self.encoder = encoder
        self.query_cache = QueryEmbeddingCache(query_cache_size)
        self.document_cache = None if document_store is None else DocumentEmbeddingCache(document_store)
        self.document_advice = document_advice  # the truncation warning's advice ({limit}: tokens read)
        self.document_instruction = normalize_instruction(document_instruction)
        self.lock = contextlib.nullcontext() if remote else threading.Lock()
        if self.local:  # (a server's model refuses one itself: 400)
            encoder.document_side.refuse_instruction(self.document_instruction)

    @property
    def local(self) -> bool:
        """Whether the encoder is in this process (its tokenizers are here to count with)."""
        return can_count(self.encoder)

    @property
    def document_fingerprint(self) -> str:
        """The fingerprint of what embeds documents, which the document cache keys on: another
        query side over the same documents (a two-tower or two-space model) reuses their vectors. A
        server's is the one its model card reports."""
        if self.local:
            return self.encoder.document_side.fingerprint
        return self.encoder.document_fingerprint

    @property
    def document_token_limit(self) -> int:
        """Tokens of a document's text the document side reads under the document instruction (local only)."""
        require_local(self.encoder, "document_token_limit")
        return document_token_limit(self.encoder, self.document_instruction)

    def chunk_settings(self, chunk_size: int | None = None, chunk_overlap: int | None = None) -> tuple:
        """(chunk size, overlap, a text's token ids) for chunks the document side reads whole (limits.py)."""
        return chunk_settings(self.encoder, self.document_instruction, chunk_size, chunk_overlap)

    def warn_if_truncated(self, texts: list[str], instructions: list[str | None], kind: str) -> None:
        warn_if_truncated(self.encoder, texts, instructions, kind, self.document_advice)

    def query_inputs(
        self,
        queries: Sequence[Any],
        instructions: Instructions,
        default_instruction: str | None,
        knobs: Sequence[Mapping[str, float | None]],
    ) -> tuple[list[str], list[str | None], list[QueryKnobs]]:
        """What ``embed_queries`` takes, checked as it enters: each query a text (check_texts), its
        instruction (one for all, or one each; None: ``default_instruction``) and its knobs (one
        mapping per query), each distinct set taken by the model."""
        queries = list(queries)
        check_texts(queries, "query")
        per_query = per_item_instructions(instructions, len(queries), texts="queries", default=default_instruction)
        checked = [QueryKnobs.checked(knob) for knob in knobs]
        for distinct in set(checked):
            distinct.require(self.encoder)
        return queries, per_query, checked

    def layered_query_inputs(
        self,
        queries: Sequence[Any],
        instructions: Instructions,
        default_instruction: str | None,
        own: Mapping[str, float | None],
        asked: Mapping[str, float | None] | None,
    ) -> tuple[list[str], list[str | None], list[QueryKnobs]]:
        """``query_inputs`` with each query's knobs layered: the call's (``asked``), else those the
        query string carries (carried.py), else ``own`` (e.g. a framework's embedding fields)."""
        queries, asked = list(queries), QueryKnobs.checked(asked)
        per_query = [{**own, **knobs_of(query), **asked} for query in queries]
        return self.query_inputs(queries, instructions, default_instruction, per_query)

    def document_inputs(self, texts: Sequence[Any]) -> list[str]:
        """Documents as a call gives them, checked (check_texts), with one TruncationWarning for the call."""
        texts = list(texts)
        check_texts(texts, "document")
        self.warn_if_truncated(texts, [self.document_instruction] * len(texts), "document")
        return texts

    def document_slices(self, texts: list[str], size: int) -> Iterator[tuple[list[str], list[str | None], Any]]:
        """Checked documents (``document_inputs``) in slices of ``size``, each as (its texts, their
        instructions, a call that embeds it): a caller reports each slice as one call, and the lock
        is freed between slices, so queries from other threads are not held up by a long ingestion."""
        for start in range(0, len(texts), size):
            batch = texts[start : start + size]
            yield batch, [self.document_instruction] * len(batch), partial(self.embed_documents, batch, size)

    def embed_queries(
        self, queries: list[str], instructions: list[str | None], knobs: list[QueryKnobs], batch_size: int
    ) -> list[Vector]:
        """The cache, then one encoder call per distinct knobs for what it lacks, in order. ``str()``
        drops what a str subclass carries (the LlamaIndex integration's InstructedText)."""
        keys = [
            QueryKey(self.encoder.fingerprint, instruction, str(query), tuple(sorted(knob.items())))
            for query, instruction, knob in zip(queries, instructions, knobs)
        ]
        results: list[Vector | None] = [self.query_cache.get(key) for key in keys]
        missing = [position for position, found in enumerate(results) if found is None]
        if missing:
            self.warn_if_truncated([queries[i] for i in missing], [instructions[i] for i in missing], "query")
        for knob in dict.fromkeys(knobs[i] for i in missing):  # one call per distinct knobs, in order
            group = [i for i in missing if knobs[i] == knob]
            with self.lock:
                fresh = self.encoder.encode_queries(
                    [str(queries[i]) for i in group],
                    [instructions[i] for i in group],
                    batch_size=batch_size,
                    **knob,  # only a model with that knob gets one (checked where it entered)
                )
            for position, vector in zip(group, fresh.tolist()):
                self.query_cache.put(keys[position], vector)
                results[position] = vector
        return results  # type: ignore[return-value]

    def embed_documents(self, texts: list[str], batch_size: int) -> list[Vector]:
        """Documents under the document instruction, through the document cache when there is one."""
        instruction = self.document_instruction
        if self.document_cache is None:
            return self._encode_documents(texts, instruction, batch_size)
        keys = [DocumentEmbeddingCache.key(self.document_fingerprint, instruction, text) for text in texts]
        results = self.document_cache.get_many(keys)
        missing = [position for position, found in enumerate(results) if found is None]
        if missing:
            fresh = self._encode_documents([texts[i] for i in missing], instruction, batch_size)
            self.document_cache.put_many([keys[i] for i in missing], fresh)
            for position, vector in zip(missing, fresh):
                results[position] = vector
        return results  # type: ignore[return-value]

    def _encode_documents(self, texts: list[str], instruction: str | None, batch_size: int) -> list[Vector]:
        # The encoder's document side sorts each slice by length, so padding stays small.
        with self.lock:
            vectors = self.encoder.encode_documents(texts, instruction=instruction, batch_size=batch_size)
        return vectors.tolist()
