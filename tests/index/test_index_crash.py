"""kill -9 during `instemb-rag index` at chosen points (and at a timed moment): the next run
repairs the store and ends with exactly the chunks of the current files."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import fulltext_matches_chunks, index_cli_args, indexed_state
from typer.testing import CliRunner

from instemb_rag.cli import app
from instemb_rag.index import Index

PROJECT_ROOT = Path(__file__).resolve().parents[2]
FIRST_VERSION = {
    "tents/ridge.md": "the tent is durable nylon . good in rain and wind .",
    "tents/light.md": "a light tent . packed size 30 cm . weight 1 kg .",
    "stove.txt": "the stove is light . fuel gas burner .",
    "pack.txt": "the backpack strap and frame are heavy but durable .",
}
SECOND_VERSION = {  # two changed, one deleted (pack.txt), two added
    "tents/ridge.md": "the tent floor seam is durable . no water in rain .",
    "tents/light.md": FIRST_VERSION["tents/light.md"],
    "stove.txt": "the stove is heavy and warm . good for a cold camp night .",
    "notes/trip.md": "a cold night on a camp trip . the tent and stove were good .",
    "notes/review.txt": "review : the zipper is poor but the pole is great .",
}


def write_version(docs: Path, version: dict[str, str]) -> None:
    for path in docs.rglob("*"):
        if path.is_file() and path.relative_to(docs).as_posix() not in version:
            path.unlink()
    for relative, text in version.items():
        (docs / relative).parent.mkdir(parents=True, exist_ok=True)
        (docs / relative).write_text(text)


def index_in_process(docs: Path, index_dir: Path, model_dir: Path, *extra: str) -> None:
    result = CliRunner().invoke(app, index_cli_args(docs, index_dir, model_dir, *extra))
    assert result.exit_code == 0, result.output


def index_subprocess(docs: Path, index_dir: Path, model_dir: Path, crash_at: str | None, kill_after: float | None):
    env = dict(os.environ, PYTHONPATH=str(PROJECT_ROOT), INSTEMB_CRASH_AT=crash_at or "")
    command = [sys.executable, "-m", "instemb_rag.cli", *index_cli_args(docs, index_dir, model_dir)]
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if kill_after is not None:
        time.sleep(kill_after)
        process.send_signal(signal.SIGKILL)
    output, _ = process.communicate(timeout=300)
    return process.returncode, output.decode(errors="replace")


def ranked(index_dir: Path, encoder) -> list[tuple[str, float]]:
    with Index.open(index_dir, encoder=encoder) as index:
        return [(hit.source, round(hit.score, 4)) for hit in index.search("durable tent in rain", k=10)]


@pytest.mark.parametrize(
    ("store", "crash_at", "kill_after"),
    [
        ("faiss", "before_commit:1", None),  # killed before the first changed file commits
        ("faiss", "after_commit:3", None),  # three files committed, FAISS cache not yet written
        ("faiss", "before_faiss:1", None),  # all committed, cache of the new generation missing
        ("qdrant", "after_commit:2", None),  # two files in the catalog and shard, store generation lagging
        ("qdrant", None, 6.0),  # a timed kill wherever the run happens to be
    ],
)
def test_kill_then_rerun_ends_with_exactly_the_current_files(tiny_model_dir, tmp_path, store, crash_at, kill_after):
    from instemb_rag import InstEmbEncoder

    docs, index_dir = tmp_path / "docs", tmp_path / "index"
    write_version(docs, FIRST_VERSION)
    index_in_process(docs, index_dir, tiny_model_dir, "--store", store)
    write_version(docs, SECOND_VERSION)

    code, output = index_subprocess(docs, index_dir, tiny_model_dir, crash_at, kill_after)
    if crash_at is not None:
        assert code == -signal.SIGKILL, output
    encoder = InstEmbEncoder.from_pretrained(tiny_model_dir, device="cpu")
    # Between the kill and the next run, a query answers from a committed state: every
    # returned file holds the chunks of either its old or its new version, never a mix.
    for source, _ in ranked(index_dir, encoder):
        chunks = indexed_state(index_dir)[source]
        assert chunks in ([FIRST_VERSION.get(source)], [SECOND_VERSION.get(source)])

    index_in_process(docs, index_dir, tiny_model_dir)
    assert indexed_state(index_dir) == {source: [text] for source, text in SECOND_VERSION.items()}
    fulltext_matches_chunks(index_dir)  # committed in the chunks' transactions: never ahead or behind
    fresh_dir = tmp_path / "fresh"
    index_in_process(docs, fresh_dir, tiny_model_dir, "--store", store)
    assert ranked(index_dir, encoder) == ranked(fresh_dir, encoder)
