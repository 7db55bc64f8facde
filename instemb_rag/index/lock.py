"""The index lock: one `index` run at a time (and an embedded Qdrant shard opened by one process)."""

from __future__ import annotations

from pathlib import Path

from filelock import FileLock, Timeout

from .errors import IndexBusyError

LOCK_FILE = "index.lock"


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
