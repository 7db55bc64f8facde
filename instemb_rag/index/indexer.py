"""Incremental, crash-safe indexing of a folder into an index folder.

Order of work, chosen so that a `kill -9` at any point leaves a state the next run repairs:

1. take the index lock (a second run waits ``wait`` seconds, then refuses);
2. wipe on --rebuild (manifest first), open the catalog (adding its full-text index when it
   predates it: one transaction, fulltext.py) and the store, write the manifest;
3. repair: a store whose generation lags the catalog is reconciled (Qdrant: by chunk id);
4. remove files that disappeared (or that the selection no longer reads: selection.py); plan the
   new or changed files (content hash); read, split and embed them (in this process:
   local_embedding.py, every finished batch kept in resume.py's pending vectors; or on a Ray
   cluster: ray_embedding.py), saying the plan and its estimate first (plan.py), and commit each
   file in its own transaction (its old chunks go in the same transaction), mirroring each
   commit into the store and syncing it after each group of files;
5. bring the vector store up to the catalog's generation (FAISS: rewrite the cache file).

Ctrl-C while embedding stops the run there: the committed files stay, the store is brought up to
date, the pending vectors keep the batches of files not yet complete, and the report says
``interrupted``; the next run goes on from there. ``options.dry_run`` reads the folder and the
index without changing either, measures one batch and says the plan.

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
from .documents import Skipped, content_hash, discover, resolve_chunk_size
from .errors import BadInputError, IndexFolderError
from .local_embedding import LocalEmbedding
from .lock import LOCK_FILE, hold_index_lock  # noqa: F401  (hold_index_lock: also imported from here)
from .manifest import Manifest, check_encoder, describe_side, read_manifest, write_manifest
from .options import IndexOptions, resolve_options
from .plan import KindCount, RunPlan, kind_of
from .resume import PENDING_FILE, PendingVectors, remove_pending
from .run_shared import EmbeddedFile, FileTask, IndexReport
from .stores import open_store, wipe_index
from .stores.base import VectorStore

__all__ = ["Indexer", "LocalEmbedding", "NullProgress"]


class NullProgress:
    def plan(self, plan: RunPlan, estimate) -> None: ...  # said before the work (plan.py)
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
        if self.options.dry_run:  # nothing is written: no folder, no lock
            report = self._dry_run(root, progress)
            report.seconds = time.perf_counter() - started
            return report
        self.index_dir.mkdir(parents=True, exist_ok=True)
        lock = hold_index_lock(self.index_dir, self.options.wait_seconds)
        try:
            report = self._run_locked(root, progress)
        finally:
            lock.release()
        report.seconds = time.perf_counter() - started
        return report

    # ------------------------------------------------------------------ setup
    def _discover(self, root: Path):
        """The files to read (``None`` with a report when the selection leaves none: nothing changes)."""
        discovery = discover(root, self.options.max_file_bytes, self.options.selection)
        if discovery.files:
            return discovery, None
        if discovery.files_left_out or discovery.folders_left_out or discovery.notes:
            report = self._new_report(discovery)
            reasons = "; ".join(f"{reason}: {count:,}" for reason, count in sorted(discovery.left_out.items()))
            report.nothing_selected = (
                f"Nothing to read in {root}: {discovery.files_left_out:,} files left out"
                + (f" ({reasons})" if reasons else "")
                + (f", {discovery.folders_left_out:,} folders left out whole" if discovery.folders_left_out else "")
                + ". Nothing was embedded and the index is unchanged."
            )
            return discovery, report
        reasons = "; ".join(f"{item.path}: {item.reason}" for item in discovery.skipped[:5])
        raise BadInputError(
            f"No indexable files in {root}"
            + (f" (skipped: {reasons})" if reasons else " (it is empty)")
            + ". Nothing was changed in the index."
        )

    @staticmethod
    def _new_report(discovery) -> IndexReport:
        report = IndexReport(files_found=discovery.files_found, skipped=list(discovery.skipped))
        report.files_left_out = discovery.files_left_out
        report.plan.left_out = dict(discovery.left_out)
        report.plan.folders_left_out = discovery.folders_left_out
        report.notes, report.warnings = list(discovery.notes), list(discovery.warnings)
        report.plan.notes = [*discovery.warnings, *discovery.notes]
        return report

    def _run_locked(self, root: Path, progress) -> IndexReport:
        discovery, nothing = self._discover(root)  # before any wipe: a selection of nothing changes nothing
        if nothing is not None:
            return nothing
        manifest = None if self.options.rebuild else read_manifest(self.index_dir)
        if manifest is None:
            # --rebuild, or leftovers of a run killed before its manifest was written
            wipe_index(self.index_dir, self.options.stores, self.encoder.dimension, self.options.rebuild)
        else:
            check_encoder(manifest, self.encoder, self.index_dir, self.options.model_label)
        stores = resolve_options(self.options.stores, manifest, self.index_dir)
        catalog = Catalog.open(self.index_dir)
        store = None
        try:
            self._check_root(catalog, discovery.root)
            fulltext_chunks = catalog.ensure_fulltext()  # before any commit: the triggers keep it in step
            store = open_store(self.index_dir, catalog, stores, self.encoder.dimension)
            if manifest is None:
                store.ensure_empty()
            self._write_manifest(manifest, stores.store, store.describe())
            report = self._new_report(discovery)
            if fulltext_chunks is not None and manifest is not None:  # an index built before hybrid search
                report.fulltext_added = fulltext_chunks
            report.repaired = store.repair()
            self._remove_missing(catalog, store, discovery, report)
            tasks = self._plan(catalog.file_hashes(), discovery, report)
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
    def _dry_run(self, root: Path, progress) -> IndexReport:
        """The plan of a run, changing nothing: the index is read (if there is one), one batch is
        embedded for the estimate and thrown away."""
        discovery, nothing = self._discover(root)
        if nothing is not None:
            return nothing
        manifest = None if self.options.rebuild else read_manifest(self.index_dir)
        if manifest is not None:
            check_encoder(manifest, self.encoder, self.index_dir, self.options.model_label)
        catalog = Catalog.open(self.index_dir, read_only=True) if manifest is not None else None
        report = self._new_report(discovery)
        try:
            known = catalog.file_hashes() if catalog is not None else {}
            kept = {item.path for item in discovery.skipped if item.keep_previous}
            report.removed = sorted(set(known) - set(discovery.files) - kept)
            tasks = self._plan(known, discovery, report)
            embedding = LocalEmbedding(self.encoder, self.options, self._pending(existing_only=True))
            embedding.bind_store(None, catalog)
            self._embed_all(embedding, tasks, report, progress, None, None)
        finally:
            if catalog is not None:
                catalog.close()
        return report

    def _plan(self, known: dict[str, str], discovery, report: IndexReport) -> list[FileTask]:
        """The files to (re)embed: those whose content hash differs from the catalog's."""
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
        report.plan.unchanged, report.plan.removed = report.unchanged, len(report.removed)
        return tasks

    def _pending(self, existing_only: bool = False) -> PendingVectors | None:
        """The finished batches of an interrupted run (resume.py), opened for this run."""
        if existing_only and not (self.index_dir / PENDING_FILE).is_file():
            return None
        return PendingVectors.open(self.index_dir, self.encoder.document_side.fingerprint, self.encoder.dimension)

    def _embedding(self):
        """Where chunks are embedded: this process, or a Ray cluster (``options.ray``)."""
        if self.options.ray is None:
            return LocalEmbedding(self.encoder, self.options, self._pending())
        from .ray_embedding import RayEmbedding  # ray is imported on this path only

        return RayEmbedding(self.encoder, self.options)

    def _embed_and_commit(
        self, catalog: Catalog, store: VectorStore, tasks: list[FileTask], report: IndexReport, progress
    ) -> None:
        if not tasks:
            self._say_plan(report, progress)
            progress.start(0)
            remove_pending(self.index_dir)
            return
        embedding = self._embedding()
        store = embedding.bind_store(store, catalog)

        def commit(files: list[EmbeddedFile]) -> None:
            self._commit_files(catalog, store, files, report, progress, getattr(embedding, "advances_progress", False))

        self._embed_all(embedding, tasks, report, progress, store, commit)
        pending = getattr(embedding, "pending", None)
        if pending is not None:
            if report.interrupted:
                pending.close()
            else:
                pending.remove()  # everything is committed: nothing to go on from

    def _embed_all(self, embedding, tasks: list[FileTask], report: IndexReport, progress, store, commit) -> None:
        """Run the embedding step, committing what it hands back (``commit`` None: a dry run); Ctrl-C
        stops it, keeping what is done."""
        pending = getattr(embedding, "pending", None)
        if pending is not None:
            report.plan.kept_from_interrupted = pending.kept_at_start
        if self.options.ray is not None:  # Ray reads on its workers: the plan counts files, not chunks
            for task in tasks:
                report.plan.kinds.setdefault(kind_of(task.source), KindCount()).files += 1
            self._say_plan(report, progress)
        try:
            for files in embedding.embedded(tasks, report, progress):
                if commit is not None:
                    commit(files)
            if commit is not None:
                embedding.done(store)
        except KeyboardInterrupt:
            if self.options.ray is not None or commit is None:
                raise
            report.interrupted = True
        finally:
            embedding.close()

    @staticmethod
    def _say_plan(report: IndexReport, progress) -> None:
        say = getattr(progress, "plan", None)
        if say is not None:
            say(report.plan, report.estimate)

    def _commit_files(
        self,
        catalog: Catalog,
        store: VectorStore,
        files: list[EmbeddedFile],
        report: IndexReport,
        progress,
        advanced: bool = False,
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
            if not advanced:  # the embedding step moves the bar per batch itself
                progress.advance(len(item.chunks))
            crash_point("after_commit")
        store.sync()
