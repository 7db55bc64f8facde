"""The parts of an index run that the indexer (indexer.py) and its Ray embedding step
(ray_embedding.py) share: the run's report, the files to embed and what comes back, and the one
reading-and-splitting rule both paths apply to a file (the run's options are in options.py).

Nothing here imports the indexer or the Ray path, so both depend on this module and the
indexer alone depends on the Ray path.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .documents import ChunkSplitter, Skipped, read_texts, unusable_reason

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

    @property
    def files_skipped(self) -> int:
        """The files among ``skipped`` (a symlink loop's folder is reported there but is no file)."""
        return sum(not item.folder for item in self.skipped)


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
    report.skipped.append(Skipped(task.source, reason or "no text to index", keep_previous=transient))
    if task.known and not transient:  # its content changed to something unusable: old chunks are stale
        return EmbeddedFile(task.source, task.sha256, task.size, [], np.zeros((0, dimension), np.float32))
    return None
