"""Progress bars that also work in a log file.

On a terminal rich draws a live bar. Written to a file or a pipe (``nohup ... > train.log``, CI,
a job scheduler) rich draws nothing until the task ends, so a two-hour training run would leave
an empty log. ``LoggedProgress`` keeps the live bar on terminals and, everywhere else, prints
the same columns as a plain line at most every ``log_every_s`` seconds.
"""

from __future__ import annotations

import time

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    TaskID,
    TextColumn,
    TimeRemainingColumn,
)

LOG_EVERY_S = 30.0


class LoggedProgress(Progress):
    def __init__(self, *columns: ProgressColumn | str, log_every_s: float = LOG_EVERY_S, **options):
        super().__init__(*columns, **options)
        self.log_every_s = log_every_s
        self._last_logged = time.monotonic()

    def advance(self, task_id: TaskID, advance: float = 1) -> None:
        super().advance(task_id, advance)
        self._log_line(task_id)

    def update(self, task_id: TaskID, **changes) -> None:
        super().update(task_id, **changes)
        self._log_line(task_id)

    def _log_line(self, task_id: TaskID) -> None:
        if self.disable or self.console.is_interactive:
            return
        now = time.monotonic()
        if now - self._last_logged < self.log_every_s:
            return
        self._last_logged = now
        self.console.print(self.make_tasks_table([task for task in self.tasks if task.id == task_id]))


def counting_progress(label: str, *extra: ProgressColumn, enabled: bool = True, **options) -> LoggedProgress:
    """label, bar, done/total, any extra columns, time remaining."""
    return LoggedProgress(
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        *extra,
        TimeRemainingColumn(),
        disable=not enabled,
        **options,
    )


def batches_with_progress(starts, enabled: bool, total_items: int, batch_size: int):
    """Yield each batch start of ``starts``, advancing an "embedding" bar by the batch's items."""
    if not enabled:
        yield from starts
        return
    with counting_progress("embedding") as bar:
        task = bar.add_task("embed", total=total_items)
        for start in starts:
            yield start
            bar.advance(task, min(batch_size, total_items - start))
