"""The plan before the work, --dry-run, the estimate line, and Ctrl-C followed by a run that goes
on from the finished batches (issue 69)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from helpers import index_cli_args, indexed_state
from typer.testing import CliRunner

from instemb_rag.cli import app
from instemb_rag.encoder.model import InstEmbEncoder
from instemb_rag.exit_codes import ExitCode
from instemb_rag.index.catalog import Catalog
from instemb_rag.index.plan import Estimate, RunPlan
from instemb_rag.index.resume import PENDING_FILE

runner = CliRunner()
SENTENCE = "the tent is durable nylon and the stove is light . "


def corpus(root: Path) -> Path:
    """Three long files (several chunks each at --chunk-size 16) and a short one."""
    root.mkdir(parents=True, exist_ok=True)
    for name, repeats in (("a.md", 6), ("b.md", 5), ("c.txt", 7)):
        (root / name).write_text(f"{name} " + "".join(f"part {n} : {SENTENCE}" for n in range(repeats * 2)))
    (root / "short.md").write_text("a warm night .")
    (root / "data.json").write_text('{"review": "a warm tent"}')
    return root


def cli(*args: str):
    result = runner.invoke(app, list(args), env={"COLUMNS": "200"})
    return result.exit_code, " ".join(result.output.split())


def index_args(docs: Path, index_dir: Path, model_dir: Path, *extra: str) -> list[str]:
    return index_cli_args(docs, index_dir, model_dir, "--chunk-size", "16", "--chunk-overlap", "0", *extra)


def test_dry_run_says_the_plan_and_changes_nothing(tiny_model_dir, tmp_path):
    docs, index_dir = corpus(tmp_path / "docs"), tmp_path / "index"
    code, output = cli(*index_args(docs, index_dir, tiny_model_dir, "--dry-run"))
    assert code == 0, output
    assert not index_dir.exists()
    assert "plan: Markdown (.md) 3 files" in output and "text (.txt) 1 files" in output
    assert "left out: 1 files (data files (--include to read them): 1)" in output
    assert "estimate:" in output and "chunks/s measured on the first" in output
    assert "nothing was embedded or written" in output
    code, output = cli(*index_args(docs, index_dir, tiny_model_dir))
    assert code == 0, output
    state = indexed_state(index_dir)
    (docs / "b.md").write_text("b.md changed . " + SENTENCE)
    code, output = cli(*index_args(docs, index_dir, tiny_model_dir, "--dry-run"))
    assert code == 0, output
    assert "plan: Markdown (.md) 1 files" in output and "files: 3 unchanged" in output
    assert indexed_state(index_dir) == state  # the dry run left the index as it was


def test_the_plan_and_estimate_come_before_the_summary(tiny_model_dir, tmp_path):
    docs, index_dir = corpus(tmp_path / "docs"), tmp_path / "index"
    code, output = cli(*index_args(docs, index_dir, tiny_model_dir))
    assert code == 0, output
    assert output.index("plan:") < output.index("estimate:") < output.index("files found")
    state = indexed_state(index_dir)
    distinct = len({text for texts in state.values() for text in texts})  # a repeated text is embedded once
    assert f"estimate: {distinct} chunks in about" in output
    assert "chunks/s" in output.split("files found")[1]  # the summary's rate


def test_the_estimate_and_its_verdict():
    estimate = Estimate(
        chunks=100, characters=100_000, measured_chunks=10, measured_characters=5_000, measured_seconds=10.0
    )
    assert estimate.seconds == pytest.approx(200.0)  # 100,000 characters at 500/s
    assert "100 chunks in about 3 min 20 s" in estimate.line() and "1.00 chunks/s" in estimate.line()
    assert estimate.verdict(seconds=300.0, chunks=100) is None  # 1.5x: within the tolerance
    slow = estimate.verdict(seconds=500.0, chunks=100)
    assert "2.5x longer" in slow and "0.20 chunks/s" in slow
    assert "2.5x shorter" in estimate.verdict(seconds=40.0, chunks=50)  # half the chunks in a fifth of the time
    plan = RunPlan(unchanged=2)
    assert plan.lines() == ["nothing to embed", "files: 2 unchanged, 0 skipped"]


def test_ctrl_c_keeps_every_finished_batch_and_the_next_run_goes_on(tiny_model_dir, tmp_path, monkeypatch):
    docs = corpus(tmp_path / "docs")
    clean_dir, index_dir = tmp_path / "clean", tmp_path / "index"
    code, output = cli(*index_args(docs, clean_dir, tiny_model_dir, "--batch-size", "2"))
    assert code == 0, output
    clean = indexed_state(clean_dir)
    distinct = len({text for texts in clean.values() for text in texts})  # a repeated text is embedded once
    assert distinct >= 10

    real_encode = InstEmbEncoder.encode_documents
    calls = []

    def interrupted_on_the_fourth_batch(self, documents, instruction=None, **kwargs):
        calls.append(len(documents))
        if len(calls) == 4:
            raise KeyboardInterrupt  # what Ctrl-C raises in the main thread
        return real_encode(self, documents, instruction, **kwargs)

    monkeypatch.setattr(InstEmbEncoder, "encode_documents", interrupted_on_the_fourth_batch)
    code, output = cli(*index_args(docs, index_dir, tiny_model_dir, "--batch-size", "2"))
    assert code == ExitCode.INTERRUPTED, output
    assert "interrupted:" in output and "run the same command again to go on" in output
    assert (index_dir / PENDING_FILE).is_file()
    kept_batches = sum(calls[:3])  # three batches finished before the interrupt
    monkeypatch.setattr(InstEmbEncoder, "encode_documents", real_encode)

    calls_after = []

    def counted(self, documents, instruction=None, **kwargs):
        calls_after.append(len(documents))
        return real_encode(self, documents, instruction, **kwargs)

    monkeypatch.setattr(InstEmbEncoder, "encode_documents", counted)
    code, output = cli(*index_args(docs, index_dir, tiny_model_dir, "--batch-size", "2"))
    assert code == 0, output
    assert f"going on from an interrupted run: {kept_batches} chunks it embedded are kept" in output
    assert f"chunks kept (interrupted run) │ {kept_batches}" in output
    assert sum(calls_after) == distinct - kept_batches  # no finished batch embedded twice
    assert not (index_dir / PENDING_FILE).exists()  # everything committed: nothing left to go on from
    assert indexed_state(index_dir) == clean
    assert_same_vectors(index_dir, clean_dir)


def assert_same_vectors(index_dir: Path, clean_dir: Path) -> None:
    def vectors(folder: Path) -> dict:
        catalog = Catalog.open(folder)
        try:
            rows = catalog.connection.execute("SELECT path, position, vector FROM chunks").fetchall()
        finally:
            catalog.close()
        return {(path, position): np.frombuffer(blob, np.float32) for path, position, blob in rows}

    resumed, clean = vectors(index_dir), vectors(clean_dir)
    assert resumed.keys() == clean.keys()
    for key in clean:
        np.testing.assert_allclose(resumed[key], clean[key], atol=1e-5)


def test_an_edited_file_reembeds_only_its_changed_chunks(tiny_model_dir, tmp_path, monkeypatch):
    docs, index_dir = corpus(tmp_path / "docs"), tmp_path / "index"
    code, output = cli(*index_args(docs, index_dir, tiny_model_dir))
    assert code == 0, output
    (docs / "c.txt").write_text((docs / "c.txt").read_text() + " and a new closing line about the zipper .")
    real_encode = InstEmbEncoder.encode_documents
    embedded = []

    def counted(self, documents, instruction=None, **kwargs):
        embedded.extend(documents)
        return real_encode(self, documents, instruction, **kwargs)

    monkeypatch.setattr(InstEmbEncoder, "encode_documents", counted)
    code, output = cli(*index_args(docs, index_dir, tiny_model_dir))
    assert code == 0, output
    chunks_of_c = indexed_state(index_dir)["c.txt"]
    assert 0 < len(embedded) < len(chunks_of_c)
    assert all("zipper" in text for text in embedded) or len(embedded) <= 2
