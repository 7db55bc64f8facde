"""What an index run's two embedding paths share, the indexer's own (indexer.py,
local_embedding.py) and its Ray step (ray_embedding.py): the run's report, the files to embed and
what comes back, and the one reading-and-splitting rule both paths apply to a file (the run's
options are in options.py).

Nothing here imports the indexer or the Ray path, so both depend on this module and the
indexer alone depends on the Ray path. (Before issue 68, names round 2, this was index/run_parts.py,
kept there as an alias: "parts" names only a composed model's components.)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .documents import NO_TEXT, ChunkSplitter, Skipped, read_texts, unusable_reason
from .plan import Estimate, RunPlan

EMBED_GROUP_CHUNKS = 64  # chunks embedded together before their files are committed


@dataclass
class IndexReport:
    files_found: int = 0  # every file met, of any type: embedded + unchanged + skipped files
    indexed: list[str] = field(default_factory=list)
    unchanged: int = 0
    removed: list[str] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    chunks_added: int = 0
    chunks_total: int = 0
    repaired: str | None = None
    fulltext_added: int | None = None  # an older index got its full-text index over this many chunks
    seconds: float = 0.0
    # issue 69: what was left out and why, the plan and its estimate, how the embedding went
    files_left_out: int = 0  # met by the walk, not read (ignore files, patterns, data files)
    plan: RunPlan = field(default_factory=RunPlan)
    estimate: Estimate | None = None
    embedded_chunks: int = 0  # chunks run through the model (the rest of chunks_added had vectors already)
    embedding_seconds: float = 0.0
    interrupted: bool = False  # Ctrl-C: every finished batch is kept, the next run goes on
    nothing_selected: str | None = None  # the selection left nothing to read: said, nothing changed
    notes: list[str] = field(default_factory=list)  # patterns that matched nothing
    warnings: list[str] = field(default_factory=list)  # unreadable ignore files

    @property
    def files_skipped(self) -> int:
        """The files among ``skipped`` (a symlink loop's folder is reported there but is no file)."""
        return sum(not item.folder for item in self.skipped)

    @property
    def data_files_without_text(self) -> int:
        """The skipped data files that parse but hold no text (documents.data_without_text)."""
        return sum(item.no_text for item in self.skipped)

    @property
    def estimate_verdict(self) -> str | None:
        """The summary's line when the run took more than 2x longer or shorter than estimated."""
        if self.estimate is None:
            return None
        return self.estimate.verdict(self.embedding_seconds, self.embedded_chunks)


@dataclass
class FileTask:
    """A new or changed file to read, split and embed."""

    source: str  # path relative to the indexed folder
    path: Path
    sha256: str
    size: int
    known: bool  # the catalog holds an older version of it


@dataclass
class EmbeddedFile:
    """A file ready to commit: its chunks and their vectors (none: its old chunks go)."""

    source: str
    sha256: str
    size: int
    chunks: list
    vectors: np.ndarray


def chunk_file(path: Path, splitter: ChunkSplitter) -> tuple[list, str | None, bool]:
    """(chunks, why there are none, whether that is transient) for one file; the one rule both the
    local and the Ray path use. A transient failure (OSError) keeps the file's previous chunks."""
    try:
        reason = unusable_reason(path)
        return ([] if reason else splitter.split(read_texts(path))), reason, False
    except OSError as error:
        return [], f"unreadable: {error.strerror or error}", True
    except Exception as error:  # a reader's own failure on a damaged file (PDF, JSON, CSV)
        return [], f"reader failed: {type(error).__name__}: {str(error)[:120]}", False


def file_outcome(
    task: FileTask,
    chunks: list,
    reason: str | None,
    transient: bool,
    report: IndexReport,
    vectors: np.ndarray | None = None,
    dimension: int = 0,
) -> EmbeddedFile | None:
    """What to commit for a file (None: nothing), recording a skip in the report."""
    if chunks:
        return EmbeddedFile(task.source, task.sha256, task.size, chunks, vectors)
    reason = reason or "no text to index"
    report.skipped.append(Skipped(task.source, reason, keep_previous=transient, no_text=reason.startswith(NO_TEXT)))
    if task.known and not transient:  # its content changed to something unusable: old chunks are stale
        return EmbeddedFile(task.source, task.sha256, task.size, [], np.zeros((0, dimension), np.float32))
    return None
