"""The exit code of an error, the same for every `instemb-rag` command and for the resident query
process, which answers for `query` (docs/usage.md "Exit codes"; cli/common.py's docstring lists
them). Its own module so that the resident process and the CLI share it without importing each other."""

from __future__ import annotations

from enum import IntEnum

__all__ = ["ExitCode", "exit_code_for"]


class ExitCode(IntEnum):
    OK = 0
    FAILED = 1
    BAD_INPUT = 2
    BUSY = 3
    INDEX_FOLDER = 4
    MODEL = 5
    RAY_WORKER = 6
    INTERRUPTED = 130  # Ctrl-C (128 + SIGINT): `index` keeps every finished batch; run it again to go on


def exit_code_for(error: Exception) -> int:
    """The exit code of an error a command reports (most specific class first)."""
    from .errors import CheckpointError, InstEmbError, ModelNotFoundError
    from .index.errors import IndexBusyError, IndexFolderError, RayWorkerError

    if isinstance(error, RayWorkerError):
        return ExitCode.RAY_WORKER
    if isinstance(error, IndexBusyError):
        return ExitCode.BUSY
    if isinstance(error, IndexFolderError):
        return ExitCode.INDEX_FOLDER
    if isinstance(error, (CheckpointError, ModelNotFoundError)):
        return ExitCode.MODEL
    if isinstance(error, (InstEmbError, ValueError)):
        return ExitCode.BAD_INPUT
    return ExitCode.FAILED
