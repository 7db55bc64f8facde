"""The indexing bar's chunks/s is the run's average, the figure the summary table repeats."""

from __future__ import annotations

from rich.progress import Progress

from instemb_rag.index.display import ChunkRateColumn


def test_rate_is_the_average_over_the_run_not_the_last_burst():
    clock = [0.0]
    column = ChunkRateColumn()
    with Progress(column, get_time=lambda: clock[0], disable=True) as progress:
        task_id = progress.add_task("embed", total=11)
        # Model warm-up and the first forward passes, then two commit groups land together.
        clock[0] = 13.9
        progress.advance(task_id, 8)
        clock[0] = 14.0
        progress.advance(task_id, 3)
        task = progress.tasks[0]
        assert task.finished
        assert column.render(task).plain == "0.8 chunks/s"  # 11 chunks in 14 s, not 3 in 0.1 s
