"""Embedding an index run's chunks in this process, at the machine's speed.

- A reader thread reads and splits the files while the model embeds (torch releases the GIL in its
  kernels), so the first batch starts after the first file, not after the whole folder.
- Chunks are embedded in windows sorted by length, a forward pass per ``batch_size`` chunks of
  about one length: little padding, whichever files they come from.
- Each distinct chunk text is embedded once per index: a vector is taken instead from the batches
  an interrupted run finished (resume.py), from the chunk of the same text in the file's previous
  version (an edited file re-embeds only what changed), or from the same text earlier in this run.
- Every finished batch is written to the pending-vectors file, so Ctrl-C or a kill loses at most
  the batch in flight; a file is committed once all its chunks have vectors.
- The plan is said when the folder is read (at the latest after PLAN_BEFORE_S of embedding, which
  then waits for the reader), with an estimate from the rate of the batches embedded so far (the
  first batch is embedded before the plan when the reading is quick).
"""

from __future__ import annotations

import os
import queue
import threading
import time
from dataclasses import dataclass

import numpy as np

from ..encoder.protocol import LocalEncoder
from .documents import ChunkSplitter, chunking_tokenizer
from .options import IndexOptions
from .plan import PLAN_BEFORE_S, Estimate
from .resume import PendingVectors, text_key
from .run_shared import EmbeddedFile, FileTask, IndexReport, chunk_file, file_outcome

WINDOW_BATCHES = 8  # batches of chunks sorted by length together
# A long fp32 run on a CPU is told that int8 exists (never chosen for the user: an index is
# queried at the precision it was built with, and int8's gain depends on the CPU).
INT8_HINT_AFTER_S = 600.0
INT8_HINT = (
    "--precision int8 embeds 1.3-1.9x faster on most CPUs (docs/performance.md, 'Faster on a CPU'); "
    "an index built at int8 is queried at int8"
)


def threads_for_machine() -> int:
    """torch's threads, never more than the CPUs this process may run on (a container's quota, a
    taskset): torch counts the host's cores, and threads beyond the allowed CPUs only wait."""
    import torch

    allowed = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if torch.get_num_threads() > allowed:
        torch.set_num_threads(allowed)
    return torch.get_num_threads()


class FileReader(threading.Thread):
    """Reads and splits the tasks' files in order, handing each outcome over a queue."""

    END = object()

    def __init__(self, tasks: list[FileTask], splitter: ChunkSplitter):
        super().__init__(name="instemb-index-reader", daemon=True)
        self.tasks = tasks
        self.splitter = splitter
        self.outcomes: queue.Queue = queue.Queue()
        self.stopping = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            for task in self.tasks:
                if self.stopping.is_set():
                    break
                self.outcomes.put((task, *chunk_file(task.path, self.splitter)))
        except BaseException as error:  # handed to the embedding loop, which raises it there
            self.error = error
        self.outcomes.put(self.END)


@dataclass
class FileWork:
    """A file read and split, waiting for its chunks' vectors."""

    item: EmbeddedFile
    missing: int


class LocalEmbedding:
    """Embedding in this process (see the module's docstring)."""

    advances_progress = True  # the bar moves per batch embedded, not per file committed

    def __init__(self, encoder: LocalEncoder, options: IndexOptions, pending: PendingVectors | None = None):
        self.encoder = encoder
        self.options = options
        self.pending = pending
        self.catalog = None
        self.reader: FileReader | None = None
        self.threads = (
            threads_for_machine() if getattr(getattr(encoder, "device", None), "type", "cpu") == "cpu" else None
        )

    def bind_store(self, store, catalog):
        self.catalog = catalog
        return store

    # ------------------------------------------------------------------ the loop
    def embedded(self, tasks: list[FileTask], report: IndexReport, progress):
        """Yield lists of files ready to commit (every chunk with its vector, or a file whose old
        chunks go), in the order the files were read."""
        self.report, self.progress = report, progress
        self.files: list[FileWork] = []
        self.todo: dict[str, str] = {}  # text key -> text, in the order met
        self.waiting: dict[str, list[tuple[FileWork, int]]] = {}
        self.embedded_chunks = self.embedded_characters = 0
        self.embedding_seconds = 0.0
        self.plan_said = False
        splitter = ChunkSplitter(chunking_tokenizer(self.encoder), self.options.chunk_size, self.options.chunk_overlap)
        self.reader = FileReader(tasks, splitter)
        self.reader.start()
        reading = True
        window = self.options.batch_size * WINDOW_BATCHES
        while True:
            # Past a minute of embedding the plan is owed; a dry run measures one batch, then reads on.
            hold_for_plan = not self.plan_said and (
                self.embedding_seconds >= PLAN_BEFORE_S or (self.options.dry_run and self.embedded_chunks > 0)
            )
            while reading and (len(self.todo) < window or hold_for_plan):
                reading = self._take(block=True)
            while reading and not self.reader.outcomes.empty():
                reading = self._take(block=False)
            if not reading and not self.plan_said and (self.embedded_chunks or not self.todo):
                self._say_plan()
                if self.options.dry_run:
                    return
            ready = self._ready_files()
            if ready and not self.options.dry_run:
                yield ready
            if not self.todo and not reading:
                break
            if self.todo:
                self._embed_window(window if self.plan_said or reading else self.options.batch_size)

    def _take(self, block: bool) -> bool:
        """Move one outcome of the reader into the work; False once the reader is done."""
        outcome = self.reader.outcomes.get(block=block)
        if outcome is FileReader.END:
            if self.reader.error is not None:
                raise self.reader.error
            return False
        task, chunks, reason, transient = outcome
        item = file_outcome(task, chunks, reason, transient, self.report, dimension=self.encoder.dimension)
        if item is None:
            return True
        item.vectors = np.zeros((len(item.chunks), self.encoder.dimension), np.float32)
        work = FileWork(item, 0)
        self.files.append(work)
        if not item.chunks:
            return True
        self.report.plan.add(task.source, item.chunks)
        keys = [text_key(chunk.text) for chunk in item.chunks]
        known = self._known_vectors(task, keys)
        for position, (key, chunk) in enumerate(zip(keys, item.chunks)):
            if key in known:
                item.vectors[position] = known[key]
                self.report.plan.reused += 1
                continue
            work.missing += 1
            self.waiting.setdefault(key, []).append((work, position))
            if key in self.todo:  # the same text earlier in this run: embedded once
                self.report.plan.reused += 1
            else:
                self.todo[key] = chunk.text
        return True

    def _known_vectors(self, task: FileTask, keys: list[str]) -> dict[str, np.ndarray]:
        """Vectors of these chunk texts that need no embedding: an interrupted run's finished
        batches, and the chunks of the file's previous version."""
        known = self.pending.get(keys) if self.pending is not None else {}
        if task.known and self.catalog is not None:
            with self.catalog.lock:
                rows = self.catalog.connection.execute(
                    "SELECT text, vector FROM chunks WHERE path = ?", (task.source,)
                ).fetchall()
            for text, blob in rows:
                vector = np.frombuffer(blob, dtype=np.float32)
                if vector.shape[0] == self.encoder.dimension:
                    known.setdefault(text_key(text), vector)
        return known

    def _embed_window(self, size: int) -> None:
        """Embed the first ``size`` chunks waiting, longest first, a forward pass per batch."""
        keys = list(self.todo)[:size]
        keys.sort(key=lambda key: -len(self.todo[key]))
        for start in range(0, len(keys), self.options.batch_size):
            batch = keys[start : start + self.options.batch_size]
            texts = [self.todo[key] for key in batch]
            started = time.perf_counter()
            vectors = self.encoder.encode_documents(texts, batch_size=len(texts))
            self.embedding_seconds += time.perf_counter() - started
            if self.pending is not None and not self.options.dry_run:
                self.pending.add(batch, vectors)
            for key, vector in zip(batch, vectors):
                del self.todo[key]
                for work, position in self.waiting.pop(key):
                    work.item.vectors[position] = vector
                    work.missing -= 1
            self.embedded_chunks += len(batch)
            self.embedded_characters += sum(len(text) for text in texts)
            # kept current batch by batch: an interrupted run's summary reports them too
            self.report.embedded_chunks, self.report.embedding_seconds = self.embedded_chunks, self.embedding_seconds
            if self.plan_said:
                self.progress.advance(len(batch))
            if not self.plan_said and self.options.dry_run:
                return  # a dry run measures one batch

    def _ready_files(self) -> list[EmbeddedFile]:
        """The files, in reading order, whose every chunk has its vector (the first not ready stops it:
        the commits keep the files' order)."""
        ready = []
        while self.files and self.files[0].missing == 0:
            ready.append(self.files.pop(0).item)
        return ready

    def _say_plan(self) -> None:
        plan = self.report.plan
        to_embed = self.embedded_chunks + len(self.todo)
        characters = self.embedded_characters + sum(len(text) for text in self.todo.values())
        if self.embedded_chunks:
            self.report.estimate = Estimate(
                to_embed, characters, self.embedded_chunks, self.embedded_characters, self.embedding_seconds
            )
            if self.report.estimate.seconds > INT8_HINT_AFTER_S and self._fp32_on_cpu():
                plan.notes.append(INT8_HINT)
        self.plan_said = True
        say = getattr(self.progress, "plan", None)
        if say is not None:
            say(plan, self.report.estimate)
        if self.options.dry_run:
            return
        self.progress.start(to_embed)
        if self.embedded_chunks:
            self.progress.advance(self.embedded_chunks)

    def _fp32_on_cpu(self) -> bool:
        """Whether the LLM that embeds documents runs in fp32 on the CPU (where int8 is faster)."""
        parts = [self.encoder, *getattr(self.encoder, "parts", {}).values()]
        llm = next((part for part in parts if hasattr(part, "precision") and hasattr(part, "build_ids")), None)
        return llm is not None and llm.precision == "fp32" and getattr(llm.device, "type", "cpu") == "cpu"

    def done(self, store) -> None: ...

    def close(self) -> None:
        if self.reader is not None:
            self.reader.stopping.set()
