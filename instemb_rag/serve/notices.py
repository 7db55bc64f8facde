"""The encoder's notices for the user (warnings whose category has a ``cli_label``, such as the
sentence encoder's shortened instruction) collected per batch, so that a process answering for a
command line (the resident query process) can hand them back with the answer instead of leaving
them in its log.

``collect_notices()`` is installed once by such a process; ``collected_notices()`` is entered by
the thread that runs a batch and yields the list its notices land in. A notice raised on a thread
with no collector goes where Python's warnings go. Without the hook installed, nothing changes.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["collect_notices", "collected_notices"]

_local = threading.local()


@contextmanager
def collected_notices() -> Iterator[list[str]]:
    notes: list[str] = []
    _local.notes = notes
    try:
        yield notes
    finally:
        _local.notes = None


def collect_notices() -> None:
    """Route labelled warnings into the running batch's list; every such warning each time (a
    long-lived process would otherwise say each notice once per source line, then never again)."""
    python_shows = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):
        notes = getattr(_local, "notes", None)
        if getattr(category, "cli_label", None) is None or notes is None:
            return python_shows(message, category, filename, lineno, file, line)
        if str(message) not in notes:
            notes.append(str(message))

    warnings.showwarning = show
    warnings.simplefilter("always")
