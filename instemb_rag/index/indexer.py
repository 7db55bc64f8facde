"""Incremental, crash-safe indexing of a folder into an index folder.

Order of work, chosen so that a `kill -9` at any point leaves a state the next run repairs:

1. take the index lock (a second run waits ``wait`` seconds, then refuses);
2. wipe on --rebuild (manifest first), open the catalog and store, write the manifest;
3. repair: a Qdrant store whose generation lags the catalog is reconciled by chunk id;
4. remove files that disappeared, then read, split and embed new or changed files, and
   commit each file in its own transaction (its old chunks go in the same transaction);
5. bring the vector store up to the catalog's generation (FAISS: rewrite the cache file).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from filelock import FileLock, Timeout

from . import faiss_store
from .catalog import Catalog
from .documents import ChunkSplitter, Skipped, content_hash, discover, read_texts, unusable_reason
from .errors import BadInputError, IndexBusyError, IndexFolderError
from .manifest import Manifest, check_encoder, read_manifest, write_manifest
from .stores import StoreOptions, describe_store, open_qdrant, validate_kinds, wipe_local_files

LOCK_FILE = "index.lock"
DEFAULT_MAX_FILE_BYTES = 20 * 1024 * 1024
EMBED_GROUP_CHUNKS = 64  # chunks embedded together before their files are committed


@dataclass
class IndexOptions:
    index_dir: Path = Path(".instemb")
    stores: StoreOptions = field(default_factory=StoreOptions)
    chunk_size: int = 256  # tokens of the encoder's tokenizer
    chunk_overlap: int = 32
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES
    rebuild: bool = False
    wait_seconds: float = 0.0
    batch_size: int = 16
    model_label: str = "default"


@dataclass
class IndexReport:
    files_found: int = 0
    indexed: list[str] = field(default_factory=list)
    unchanged: int = 0
    removed: list[str] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    chunks_added: int = 0
    chunks_total: int = 0
    repaired: str | None = None
    seconds: float = 0.0


@dataclass
class _Pending:
    source: str
    sha256: str
    size: int
    chunks: list


class NullProgress:
    def start(self, total_chunks: int) -> None: ...
    def advance(self, chunks: int) -> None: ...


def hold_index_lock(index_dir: Path, wait_seconds: float) -> FileLock:
    """Acquire the index lock or raise IndexBusyError with what to do."""
    lock = FileLock(str(Path(index_dir) / LOCK_FILE))
    try:
        lock.acquire(timeout=wait_seconds)
    except Timeout:
        raise IndexBusyError(
            f"Another process is using the index in {index_dir} (an `instemb-rag index` run, or a query "
            f"holding its embedded Qdrant store). Wait for it to finish, or pass --wait SECONDS to queue."
        ) from None
    return lock


class Indexer:
    def __init__(self, encoder, options: IndexOptions):
        self.encoder = encoder
        self.options = options
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
            self._wipe()  # --rebuild, or leftovers of a run killed before its manifest was written
        store_kind, faiss_kind = self._store_kinds(manifest)
        discovery = discover(root, self.options.max_file_bytes)
        if not discovery.files:
            reasons = "; ".join(f"{item.path}: {item.reason}" for item in discovery.skipped[:5])
            raise BadInputError(
                f"No indexable files in {root}" + (f" (skipped: {reasons})" if reasons else " (it is empty)")
                + ". Nothing was changed in the index."
            )
        catalog = Catalog.open(self.index_dir)
        store = None
        try:
            self._check_root(catalog, discovery.root)
            store = open_qdrant(self.index_dir, self.options.stores, self.encoder.dimension) if store_kind == "qdrant" else None
            if manifest is None:
                if store is not None and hasattr(store, "point_count") and store.point_count():
                    raise IndexFolderError(
                        f"Qdrant collection '{self.options.stores.qdrant_collection}' already holds points that "
                        "this index folder did not write. Use another --qdrant-collection or pass --rebuild."
                    )
            self._write_manifest(manifest, store_kind, faiss_kind)
            report = IndexReport(files_found=len(discovery.files), skipped=list(discovery.skipped))
            report.repaired = self._repair(catalog, store)
            self._remove_missing(catalog, store, discovery, report)
            pending = self._prepare(catalog, discovery, report)
            self._embed_and_commit(catalog, store, pending, report, progress)
            self._finish_store(catalog, store, faiss_kind, manifest)
            report.chunks_total = catalog.chunk_count()
            return report
        finally:
            if store is not None:
                store.close()
            catalog.close()

    def _wipe(self) -> None:
        wipe_local_files(self.index_dir)
        if self.options.rebuild and self.options.stores.qdrant_url:
            open_qdrant(self.index_dir, self.options.stores, self.encoder.dimension).drop_collection()

    def _store_kinds(self, manifest: Manifest | None) -> tuple[str, str]:
        chosen = self.options.stores
        if manifest is None:
            store, faiss_kind = chosen.store or "faiss", chosen.faiss_index or "flat"
        else:
            check_encoder(manifest, self.encoder.fingerprint, self.encoder.dimension, self.index_dir, self.options.model_label)
            store = manifest.store
            if chosen.store and chosen.store != store:
                raise IndexFolderError(
                    f"The index in {self.index_dir} uses --store {store}; to switch to {chosen.store}, "
                    "pass --rebuild (re-embeds everything) or use another --index-dir."
                )
            faiss_kind = chosen.faiss_index or manifest.store_options.get("faiss_index", "flat")
        validate_kinds(store, faiss_kind)
        return store, faiss_kind

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

    def _write_manifest(self, manifest: Manifest | None, store: str, faiss_kind: str) -> None:
        wanted = Manifest(
            encoder_fingerprint=self.encoder.fingerprint,
            encoder_reference=self.options.model_label,
            template=self.encoder.template.get_config_dict(),
            dimension=self.encoder.dimension,
            store=store,
            store_options=describe_store(store, faiss_kind, self.options.stores),
            chunk_size=self.options.chunk_size,
            chunk_overlap=self.options.chunk_overlap,
        )
        if manifest is None or manifest.model_dump() != wanted.model_dump():
            write_manifest(self.index_dir, wanted)

    # ------------------------------------------------------------------ repair and removal
    def _repair(self, catalog: Catalog, store) -> str | None:
        """Bring a lagging Qdrant store back to the catalog (a previous run was killed)."""
        if store is None or catalog.store_generation == catalog.generation:
            return None
        catalog_ids, _ = catalog.vectors(dimension=self.encoder.dimension)
        wanted = set(catalog_ids.tolist())
        present = store.all_ids()
        stray, missing = sorted(present - wanted), sorted(wanted - present)
        store.delete(stray)
        if missing:
            ids, vectors = catalog.vectors(missing, self.encoder.dimension)
            store.upsert(ids.tolist(), vectors, catalog.payloads(ids.tolist()))
        store.flush()
        catalog.set_store_generation(catalog.generation)
        return f"Qdrant store repaired: {len(stray)} stray points removed, {len(missing)} missing points restored"

    def _remove_missing(self, catalog: Catalog, store, discovery, report: IndexReport) -> None:
        kept = {item.path for item in discovery.skipped if item.keep_previous}
        for source in sorted(set(catalog.file_hashes()) - set(discovery.files) - kept):
            removed = catalog.remove_file(source)
            if store is not None:
                store.delete(removed)
            report.removed.append(source)
        if store is not None and report.removed:
            store.flush()
            catalog.set_store_generation(catalog.generation)

    # ------------------------------------------------------------------ reading and embedding
    def _prepare(self, catalog: Catalog, discovery, report: IndexReport) -> list[_Pending]:
        known = catalog.file_hashes()
        splitter = ChunkSplitter(self.encoder.tokenizer, self.options.chunk_size, self.options.chunk_overlap)
        pending: list[_Pending] = []
        for source, path in discovery.files.items():
            try:
                sha256 = content_hash(path)
                if known.get(source) == sha256:
                    report.unchanged += 1
                    continue
                reason = unusable_reason(path)
                chunks = [] if reason else splitter.split(read_texts(path))
            except OSError as error:
                # Transient (permissions, I/O): keep what the index already has for this file.
                report.skipped.append(Skipped(source, f"unreadable: {error.strerror or error}", keep_previous=True))
                continue
            except Exception as error:  # a reader's own failure on a damaged file (PDF, JSON, CSV)
                reason = f"reader failed: {type(error).__name__}: {str(error)[:120]}"
                chunks = []
            if not chunks:
                report.skipped.append(Skipped(source, reason or "no text to index"))
                if source in known:  # its content changed to something unusable: old chunks are stale
                    pending.append(_Pending(source, sha256, path.stat().st_size, []))
                continue
            pending.append(_Pending(source, sha256, path.stat().st_size, chunks))
        return pending

    def _embed_and_commit(self, catalog: Catalog, store, pending: list[_Pending], report: IndexReport, progress) -> None:
        progress.start(sum(len(item.chunks) for item in pending))
        group: list[_Pending] = []
        for item in pending:
            group.append(item)
            if sum(len(member.chunks) for member in group) >= EMBED_GROUP_CHUNKS:
                self._commit_group(catalog, store, group, report, progress)
                group = []
        if group:
            self._commit_group(catalog, store, group, report, progress)

    def _commit_group(self, catalog: Catalog, store, group: list[_Pending], report: IndexReport, progress) -> None:
        texts = [chunk.text for item in group for chunk in item.chunks]
        vectors = self.encoder.encode_documents(texts, batch_size=self.options.batch_size) if texts else None
        offset = 0
        for item in group:
            own = vectors[offset : offset + len(item.chunks)] if item.chunks else np.zeros((0, self.encoder.dimension), np.float32)
            offset += len(item.chunks)
            if item.chunks:
                _crash_point("before_commit")
                removed, added = catalog.replace_file(item.source, item.sha256, item.size, item.chunks, own)
            else:  # the file changed into something unusable: its old chunks are stale
                removed, added = catalog.remove_file(item.source), []
            if store is not None:
                store.delete(removed)
                store.upsert(added, own, [{"source": item.source, "position": c.position} for c in item.chunks])
            if item.chunks:
                report.indexed.append(item.source)
                report.chunks_added += len(added)
            progress.advance(len(item.chunks))
            _crash_point("after_commit")
        if store is not None:
            store.flush()
            catalog.set_store_generation(catalog.generation)

    def _finish_store(self, catalog: Catalog, store, faiss_kind: str, manifest: Manifest | None) -> None:
        generation = catalog.generation
        if store is not None:
            store.finish()
            catalog.set_store_generation(generation)
            return
        kind_changed = manifest is not None and manifest.store_options.get("faiss_index", "flat") != faiss_kind
        if not kind_changed and faiss_store.cache_path(self.index_dir, generation).is_file():
            return
        _crash_point("before_faiss")
        ids, vectors = catalog.vectors(dimension=self.encoder.dimension)
        index = faiss_store.build_index(faiss_kind, ids, vectors, self.encoder.dimension)
        faiss_store.save_cache(index, self.index_dir, generation)
        catalog.set_store_generation(generation)


def _crash_point(name: str) -> None:
    """Test hook: INSTEMB_CRASH_AT=name:N kills this process (SIGKILL) the N-th time name is reached."""
    wanted = os.environ.get("INSTEMB_CRASH_AT")
    if not wanted:
        return
    point, _, count = wanted.partition(":")
    if point != name:
        return
    _CRASH_COUNTS[name] = _CRASH_COUNTS.get(name, 0) + 1
    if _CRASH_COUNTS[name] >= int(count or 1):
        import signal

        os.kill(os.getpid(), signal.SIGKILL)


_CRASH_COUNTS: dict[str, int] = {}
