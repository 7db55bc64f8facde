"""Dynamic batching: requests that arrive within a short window share one forward pass.

Every embedding (and search query) becomes a job on one bounded queue. A single worker
thread owns the encoder: it takes the oldest job, then for up to ``max_wait_ms`` gathers
more jobs of the same kind (query or document, and for queries the same query-time knobs) until
``max_batch_size`` inputs are waiting, and embeds them all with one ``encode_queries``
(per-input instructions, so queries under different instructions share the pass) or
``encode_documents`` call per instruction. A knob (knobs.py) is one per ``encode_queries`` call,
so queries asked under different values never share a call (they would get one value). With
batching off every job runs on its own. The asyncio side awaits a future
that the worker resolves through ``loop.call_soon_threadsafe``.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Literal, Sequence

import numpy as np

from ..encoder.protocol import LocalEncoder
from ..queries import QueryKnobs
from .notices import collected_notices

Kind = Literal["query", "document"]


class QueueFullError(Exception):
    """More inputs are waiting than --max-queue allows (HTTP 503: retry later)."""


class BatcherClosedError(Exception):
    """The server is shutting down and takes no new work (HTTP 503)."""


@dataclass
class BatchingOptions:
    enabled: bool = True
    max_batch_size: int = 32  # inputs per forward pass
    max_wait_ms: float = 5.0  # how long the first job of a batch waits for company
    max_queue: int = 1024  # inputs waiting at most; beyond that new requests get 503

    def __post_init__(self) -> None:
        if self.max_batch_size < 1:
            raise ValueError(f"max_batch_size must be at least 1, got {self.max_batch_size}.")
        if self.max_wait_ms < 0:
            raise ValueError(f"max_wait_ms must be 0 or more, got {self.max_wait_ms}.")
        if self.max_queue < 1:
            raise ValueError(f"max_queue must be at least 1, got {self.max_queue}.")


@dataclass
class EncodeResult:
    vectors: np.ndarray  # [n, d] float32, L2-normalised
    tokens: int  # tokens run through the model for these inputs (every part: usage)
    # The encoder's notices for the user raised while this batch ran (warnings with a ``cli_label``,
    # e.g. a shortened instruction), where a process collects them (notices.py); else none.
    notes: list[str] = field(default_factory=list)


@dataclass
class _Job:
    texts: list[str]
    instructions: list[str | None]
    kind: Kind
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future
    # Queries: the query-time knobs given (knobs.py; one left out: the model's own). Jobs share an
    # encoder call only when these are equal.
    knobs: QueryKnobs = field(default_factory=QueryKnobs)
    enqueued: float = field(default_factory=time.monotonic)


def _resolve(future: asyncio.Future, value=None, error: BaseException | None = None) -> None:
    if future.done():  # the client went away and the request was cancelled
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value)


class DynamicBatcher:
    """One worker thread, one encoder, one bounded queue of jobs."""

    def __init__(self, encoder: LocalEncoder, options: BatchingOptions | None = None):
        self.encoder = encoder
        self.options = options or BatchingOptions()
        self._jobs: deque[_Job] = deque()
        self._queued_inputs = 0
        self._condition = threading.Condition()
        self._closed = False
        self._draining = False
        self._thread: threading.Thread | None = None
        self.forward_batches = 0
        self.inputs_embedded = 0
        self.largest_batch = 0

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> DynamicBatcher:
        if self._thread is None:
            self._thread = threading.Thread(target=self._work, name="instemb-batcher", daemon=True)
            self._thread.start()
        return self

    def close(self, timeout: float | None = None) -> None:
        """Take no new jobs, finish every queued one, then stop the worker."""
        with self._condition:
            self._closed = self._draining = True
            self._condition.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)

    def drain(self) -> None:
        """Stop waiting for company: run what is queued at once (called when shutdown begins).

        Safe from a signal handler: the condition's lock is re-entrant.
        """
        self._draining = True
        with self._condition:
            self._condition.notify_all()

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def queued_inputs(self) -> int:
        return self._queued_inputs

    # ------------------------------------------------------------------ submitting
    async def submit(
        self,
        texts: Sequence[str],
        instructions: Sequence[str | None],
        kind: Kind = "query",
        knobs: QueryKnobs | None = None,
    ) -> EncodeResult:
        """Embed texts (one instruction per text) in the next batch of their kind (queries: and of
        their ``knobs``, as checked where they entered; the caller checks that the encoder takes them)."""
        texts, instructions = list(texts), list(instructions)
        if len(texts) != len(instructions):
            raise ValueError(f"{len(texts)} texts but {len(instructions)} instructions.")
        knobs = QueryKnobs() if knobs is None else knobs
        for knob in knobs if kind != "query" else ():
            raise ValueError(f"{knob} is a query's knob; documents take none.")
        loop = asyncio.get_running_loop()
        job = _Job(texts, instructions, kind, loop, loop.create_future(), knobs)
        with self._condition:
            if self._closed:
                raise BatcherClosedError(
                    "The server is shutting down and takes no new requests; retry on another instance."
                )
            if self._queued_inputs and self._queued_inputs + len(texts) > self.options.max_queue:
                raise QueueFullError(
                    f"The server is busy: {self._queued_inputs} inputs are already waiting (--max-queue "
                    f"{self.options.max_queue}). Retry shortly, or send fewer inputs per request."
                )
            self._jobs.append(job)
            self._queued_inputs += len(texts)
            self._condition.notify_all()
        return await job.future

    # ------------------------------------------------------------------ worker
    def _work(self) -> None:
        while True:
            batch = self._next_batch()
            if batch is None:
                return
            self._run(batch)

    def _take_fitting(self, first: _Job, room: int) -> list[_Job]:
        """Queued jobs that may share ``first``'s encoder call (its kind and knobs) and fit in
        `room` inputs, oldest first (caller holds the lock)."""
        taken = []
        for job in list(self._jobs):
            if room <= 0:
                break
            if job.kind == first.kind and job.knobs == first.knobs and len(job.texts) <= room:
                self._jobs.remove(job)
                taken.append(job)
                room -= len(job.texts)
        return taken

    def _next_batch(self) -> list[_Job] | None:
        options = self.options
        with self._condition:
            while not self._jobs and not self._closed:
                self._condition.wait()
            if not self._jobs:
                return None  # closed and drained
            first = self._jobs.popleft()
            batch = [first]
            size = len(first.texts)
            if options.enabled and not self._draining:
                deadline = first.enqueued + options.max_wait_ms / 1000
                while size < options.max_batch_size:
                    more = self._take_fitting(first, options.max_batch_size - size)
                    batch += more
                    size += sum(len(job.texts) for job in more)
                    remaining = deadline - time.monotonic()
                    if size >= options.max_batch_size or remaining <= 0 or self._closed or self._draining:
                        break
                    self._condition.wait(remaining)
            self._queued_inputs -= size
            return batch

    def _run(self, batch: list[_Job]) -> None:
        texts = [text for job in batch for text in job.texts]
        instructions = [instruction for job in batch for instruction in job.instructions]
        try:
            with collected_notices() as notes:
                vectors = self._encode(batch[0].kind, texts, instructions, **batch[0].knobs.given())
            tokens = self._tokens(batch[0].kind, texts, instructions)
        except BaseException as error:  # noqa: BLE001 - every waiting request gets the error
            for job in batch:
                job.loop.call_soon_threadsafe(_resolve, job.future, None, error)
            return
        self.forward_batches += 1
        self.inputs_embedded += len(texts)
        self.largest_batch = max(self.largest_batch, len(texts))
        start = 0
        for job in batch:
            stop = start + len(job.texts)
            result = EncodeResult(vectors[start:stop], sum(tokens[start:stop]), list(notes))
            job.loop.call_soon_threadsafe(_resolve, job.future, result)
            start = stop

    def _tokens(self, kind: Kind, texts: list[str], instructions: list[str | None]) -> list[int]:
        """Tokens each input ran through, over every part of the model (usage): a document's on the
        encoder's document side (encoder/sides.py: the LLM, a sentence encoder, or both), a query's
        the LLM's prefill and any sentence encoder's pass (``query_tokens``)."""
        if kind == "document":
            side = self.encoder.document_side
            return [side.tokens(text, instruction) for text, instruction in zip(texts, instructions)]
        return [self.encoder.query_tokens(text, instruction) for text, instruction in zip(texts, instructions)]

    def _encode(self, kind: Kind, texts: list[str], instructions: list[str | None], **knobs: float) -> np.ndarray:
        """``knobs``: a query's query-time knobs (only a model that takes them is given them)."""
        batch_size = self.options.max_batch_size  # a job larger than this is split into several passes
        if kind == "query":
            return self.encoder.encode_queries(texts, instructions, batch_size=batch_size, **knobs)
        # Documents: one encode_documents call per distinct instruction (usually just None).
        output = np.zeros((len(texts), self.encoder.dimension), dtype=np.float32)
        groups: dict[str | None, list[int]] = {}
        for position, instruction in enumerate(instructions):
            groups.setdefault(instruction, []).append(position)
        for instruction, positions in groups.items():
            output[positions] = self.encoder.encode_documents(
                [texts[i] for i in positions], instruction, batch_size=batch_size
            )
        return output
