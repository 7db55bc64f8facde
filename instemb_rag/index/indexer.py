"""Incremental, crash-safe indexing of a folder into an index folder.

Order of work, chosen so that a `kill -9` at any point leaves a state the next run repairs:

1. take the index lock (a second run waits ``wait`` seconds, then refuses);
2. wipe on --rebuild (manifest first), open the catalog (adding its full-text index when it
   predates it: one transaction, fulltext.py) and the store, write the manifest;
3. repair: a store whose generation lags the catalog is reconciled (Qdrant: by chunk id);
4. remove files that disappeared; plan the new or changed files (content hash); read, split
   and embed them (in this process, or on a Ray cluster: ray_embedding.py), and commit each
   file in its own transaction (its old chunks go in the same transaction), mirroring each
   commit into the store and syncing it after each group of files;
5. bring the vector store up to the catalog's generation (FAISS: rewrite the cache file).

The store is any ``VectorStore`` (stores/base.py); nothing here depends on which one.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import numpy as np

from ..encoder.protocol import LocalEncoder
from .catalog import Catalog
from .crash import crash_point
from .documents import ChunkSplitter, Skipped, chunking_tokenizer, content_hash, discover, resolve_chunk_size
from .errors import BadInputError, IndexFolderError
from .lock import LOCK_FILE, hold_index_lock  # noqa: F401  (hold_index_lock: also imported from here)
from .manifest import Manifest, check_encoder, describe_side, read_manifest, write_manifest
from .options import IndexOptions, resolve_options
from .run_parts import EMBED_GROUP_CHUNKS, EmbeddedFile, FileTask, IndexReport, chunk_file, file_outcome
from .stores import open_store, wipe_index
from .stores.base import VectorStore

__all__ = ["Indexer", "LocalEmbedding", "NullProgress"]


class NullProgress:
    def start(self, total_chunks: int | None) -> None: ...  # None: not known in advance (Ray)
    def advance(self, chunks: int) -> None: ...


class Indexer:
    def __init__(self, encoder: LocalEncoder, options: IndexOptions):
        self.encoder = encoder
        self.options = dataclasses.replace(
            options, chunk_size=resolve_chunk_size(encoder, options.chunk_size, options.chunk_overlap)
        )
        self.index_dir = Path(options.index_dir)

    def run(self, root: Path, progress=None) -> IndexReport:
        progress = progress or NullProgress()
        started = time.perf_counter()
        root = Path(root)
        if not root.exists():
            raise BadInputError(f"{root} does not exist. Give a folder (or file) of documents to index.")
        self.index_dir.mkdir(parents=True, exist_ok=True)
        lock = hold_index_lock(self.index_dir, self.options.wait_seconds)
        try:
            report = self._run_locked(root, progress)
        finally:
            lock.release()
        report.seconds = time.perf_counter() - started
        return report

    # ------------------------------------------------------------------ setup
    def _run_locked(self, root: Path, progress) -> IndexReport:
        manifest = None if self.options.rebuild else read_manifest(self.index_dir)
        if manifest is None:
            # --rebuild, or leftovers of a run killed before its manifest was written
            wipe_index(self.index_dir, self.options.stores, self.encoder.dimension, self.options.rebuild)
        else:
            check_encoder(manifest, self.encoder, self.index_dir, self.options.model_label)
        stores = resolve_options(self.options.stores, manifest, self.index_dir)
        discovery = discover(root, self.options.max_file_bytes)
        if not discovery.files:
            reasons = "; ".join(f"{item.path}: {item.reason}" for item in discovery.skipped[:5])
            raise BadInputError(
                f"No indexable files in {root}"
                + (f" (skipped: {reasons})" if reasons else " (it is empty)")
                + ". Nothing was changed in the index."
            )
        catalog = Catalog.open(self.index_dir)
        store = None
        try:
            self._check_root(catalog, discovery.root)
            fulltext_chunks = catalog.ensure_fulltext()  # before any commit: the triggers keep it in step
            store = open_store(self.index_dir, catalog, stores, self.encoder.dimension)
            if manifest is None:
                store.ensure_empty()
            self._write_manifest(manifest, stores.store, store.describe())
            report = IndexReport(files_found=discovery.files_found, skipped=list(discovery.skipped))
            if fulltext_chunks is not None and manifest is not None:  # an index built before hybrid search
                report.fulltext_added = fulltext_chunks
            report.repaired = store.repair()
            self._remove_missing(catalog, store, discovery, report)
            tasks = self._plan(catalog, discovery, report)
            self._embed_and_commit(catalog, store, tasks, report, progress)
            store.finish(manifest.store_options if manifest is not None else None)
            report.chunks_total = catalog.chunk_count()
            return report
        finally:
            if store is not None:
                store.close()
            catalog.close()

    def _check_root(self, catalog: Catalog, root: Path) -> None:
        """Paths are stored relative to the indexed folder; another folder would delete them all."""
        resolved = str(Path(root).resolve())
        row = catalog.connection.execute("SELECT value FROM meta WHERE key = 'root'").fetchone()
        if row is None:
            with catalog.transaction() as db:
                db.execute("INSERT INTO meta VALUES ('root', ?)", (resolved,))
        elif row[0] != resolved:
            raise IndexFolderError(
                f"The index in {self.index_dir} was built from {row[0]}, not {resolved}. Indexing another "
                "folder here would drop every chunk of the first one: use another --index-dir, or --rebuild."
            )

    def _write_manifest(self, manifest: Manifest | None, store: str, store_options: dict) -> None:
        side = self.encoder.document_side  # what embeds the stored vectors (encoder/sides.py)
        wanted = Manifest(
            encoder_fingerprint=self.encoder.fingerprint,
            document_fingerprint=side.fingerprint,
            document_side=describe_side(side),
            encoder_reference=self.options.model_label,
            template=self.encoder.template.get_config_dict(),
            dimension=self.encoder.dimension,
            store=store,
            store_options=store_options,
            chunk_size=self.options.chunk_size,
            chunk_overlap=self.options.chunk_overlap,
        )
        if manifest is None or manifest.model_dump() != wanted.model_dump():
            write_manifest(self.index_dir, wanted)

    # ------------------------------------------------------------------ removal
    def _remove_missing(self, catalog: Catalog, store: VectorStore, discovery, report: IndexReport) -> None:
        kept = {item.path for item in discovery.skipped if item.keep_previous}
        for source in sorted(set(catalog.file_hashes()) - set(discovery.files) - kept):
            removed = catalog.remove_file(source)
            store.apply(removed, [], np.zeros((0, self.encoder.dimension), np.float32), [])
            report.removed.append(source)
        if report.removed:
            store.sync()

    # ------------------------------------------------------------------ planning, embedding, committing
    def _plan(self, catalog: Catalog, discovery, report: IndexReport) -> list[FileTask]:
        """The files to (re)embed: those whose content hash differs from the catalog's."""
        known = catalog.file_hashes()
        tasks: list[FileTask] = []
        for source, path in discovery.files.items():
            try:
                sha256 = content_hash(path)
                size = path.stat().st_size
            except OSError as error:
                # Transient (permissions, I/O): keep what the index already has for this file.
                report.skipped.append(Skipped(source, f"unreadable: {error.strerror or error}", keep_previous=True))
                continue
            if known.get(source) == sha256:
                report.unchanged += 1
                continue
            tasks.append(FileTask(source, path, sha256, size, source in known))
        return tasks

    def _embedding(self):
        """Where chunks are embedded: this process, or a Ray cluster (``options.ray``)."""
        if self.options.ray is None:
            return LocalEmbedding(self.encoder, self.options)
        from .ray_embedding import RayEmbedding  # ray is imported on this path only

        return RayEmbedding(self.encoder, self.options)

    def _embed_and_commit(
        self, catalog: Catalog, store: VectorStore, tasks: list[FileTask], report: IndexReport, progress
    ) -> None:
        if not tasks:
            progress.start(0)
            return
        embedding = self._embedding()
        store = embedding.bind_store(store, catalog)
        try:
            for files in embedding.embedded(tasks, report, progress):
                self._commit_files(catalog, store, files, report, progress)
            embedding.done(store)
        finally:
            embedding.close()

    def _commit_files(
        self, catalog: Catalog, store: VectorStore, files: list[EmbeddedFile], report: IndexReport, progress
    ) -> None:
        """Commit each file in its own transaction and mirror it into the store; then sync."""
        for item in files:
            if item.chunks:
                crash_point("before_commit")
                removed, added = catalog.replace_file(item.source, item.sha256, item.size, item.chunks, item.vectors)
            else:  # the file changed into something unusable: its old chunks are stale
                removed, added = catalog.remove_file(item.source), []
            store.apply(
                removed, added, item.vectors, [{"source": item.source, "position": c.position} for c in item.chunks]
            )
            if item.chunks:
                report.indexed.append(item.source)
                report.chunks_added += len(added)
            progress.advance(len(item.chunks))
            crash_point("after_commit")
        store.sync()


class LocalEmbedding:
    """Embedding in this process: split every file, then embed ``EMBED_GROUP_CHUNKS`` chunks at a time."""

    def __init__(self, encoder: LocalEncoder, options: IndexOptions):
        self.encoder = encoder
        self.options = options

    def bind_store(self, store: VectorStore, catalog: Catalog) -> VectorStore:
        return store

    def embedded(self, tasks: list[FileTask], report: IndexReport, progress):
        splitter = ChunkSplitter(chunking_tokenizer(self.encoder), self.options.chunk_size, self.options.chunk_overlap)
        pending: list[EmbeddedFile] = []
        for task in tasks:
            item = file_outcome(task, *chunk_file(task.path, splitter), report, dimension=self.encoder.dimension)
            if item is not None:
                pending.append(item)
        progress.start(sum(len(item.chunks) for item in pending))
        group: list[EmbeddedFile] = []
        for item in pending:
            group.append(item)
            if sum(len(member.chunks) for member in group) >= EMBED_GROUP_CHUNKS:
                yield self._embed(group)
                group = []
        if group:
            yield self._embed(group)

    def _embed(self, group: list[EmbeddedFile]) -> list[EmbeddedFile]:
        texts = [chunk.text for item in group for chunk in item.chunks]
        vectors = self.encoder.encode_documents(texts, batch_size=self.options.batch_size) if texts else None
        offset = 0
        for item in group:
            if item.chunks:
                item.vectors = vectors[offset : offset + len(item.chunks)]
                offset += len(item.chunks)
        return group

    def done(self, store: VectorStore) -> None: ...

    def close(self) -> None: ...
