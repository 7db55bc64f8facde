"""The parts of an index run that the indexer (indexer.py) and its Ray embedding step
(distributed.py) share: the run's options and report, the files to embed and what comes back,
and the one reading-and-splitting rule both paths apply to a file.

Nothing here imports the indexer or the Ray path, so both depend on this module and the
indexer alone depends on the Ray path.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .documents import ChunkSplitter, Skipped, read_texts, unusable_reason
from .stores import StoreOptions

DEFAULT_MAX_FILE_BYTES = 20 * 1024 * 1024
EMBED_GROUP_CHUNKS = 64  # chunks embedded together before their files are committed


@dataclass
class RayOptions:
    """How `index --ray` runs. ``encoder_kwargs`` are what each actor passes to
    ``InstEmbEncoder.from_pretrained`` (the model reference, never the model)."""

    address: str | None = None  # None / "local": start a local Ray runtime; "auto", "HOST:PORT", "ray://HOST:PORT"
    workers: int | None = None  # encoder actors; None: one per GPU, else one per CPU left after the readers
    gpus_per_worker: float | None = None  # None: 1 where the cluster has GPUs, else 0 (CPU actors)
    cpus_per_worker: float = 1.0
    files_per_task: int = 8  # files read and split per Ray Data task
    encoder_kwargs: dict = field(default_factory=dict)


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
    ray: RayOptions | None = None  # embed on a Ray cluster (distributed.py); None: in this process


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
