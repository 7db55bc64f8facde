import io

from rich.console import Console

from instemb_rag.progress import counting_progress


def _run(console, log_every_s, steps=5):
    with counting_progress("training", enabled=True, console=console, log_every_s=log_every_s) as bar:
        task = bar.add_task("train", total=steps)
        for _ in range(steps):
            bar.advance(task)


def test_written_to_a_file_it_prints_plain_status_lines_while_running():
    stream = io.StringIO()
    _run(Console(file=stream, force_terminal=False, force_interactive=False, width=100), log_every_s=0)
    lines = [line for line in stream.getvalue().splitlines() if "training" in line]
    # One line per advance while running (interval 0 here), then rich's final render.
    assert len(lines) >= 5
    assert "1/5" in lines[0] and "5/5" in lines[-1]


def test_the_interval_limits_the_lines_and_a_terminal_gets_none():
    quiet = io.StringIO()
    _run(Console(file=quiet, force_terminal=False, force_interactive=False, width=100), log_every_s=3600)
    assert "1/5" not in quiet.getvalue() and "5/5" in quiet.getvalue()  # only rich's final render

    live = io.StringIO()
    _run(Console(file=live, force_terminal=True, force_interactive=True, width=100), log_every_s=0)
    assert live.getvalue().count("\n") < 5  # the live bar redraws in place instead
