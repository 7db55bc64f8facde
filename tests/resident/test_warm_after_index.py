"""Warm from the first question (resident/warm.py): `instemb-rag index` starts the resident query
process in the background and has it open the index, so the next query is answered by a process
that already holds the model and the index; not with --no-daemon or INSTEMB_NO_DAEMON=1. The real
commands in subprocesses, a tiny model built in the test, an INSTEMB_HOME of each test's own;
every test stops the process it started."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from instemb_rag.cli import app
from instemb_rag.resident.client import ResidentClient
from instemb_rag.resident.endpoint import Endpoint

from .test_resident import DOCS, _environ_of, answer, query

WARM_NOTE = "loading this index in the background"


@pytest.fixture()
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("INSTEMB_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("INSTEMB_NO_DAEMON", raising=False)
    monkeypatch.setenv("INSTEMB_DAEMON_IDLE", "300")
    yield tmp_path / "home"
    ResidentClient().stop()


@pytest.fixture()
def docs(tmp_path) -> Path:
    folder = tmp_path / "docs"
    for name, text in DOCS.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    return folder


def index(docs: Path, index_dir: Path, model: Path, *options: str):
    """`instemb-rag index` in this process (its helper is a process of its own either way)."""
    arguments = ["index", str(docs), "--index-dir", str(index_dir), "--model", str(model), "--no-progress"]
    result = CliRunner().invoke(app, [*arguments, *options])
    assert result.exit_code == 0, result.output
    return result


def holding(index_dir: Path, timeout: float = 120.0) -> dict:
    """The process's status once it holds ``index_dir`` (opened without any query of ours)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = ResidentClient().status()
        if status and str(index_dir.resolve()) in {held["index_dir"] for held in status["indexes"]}:
            return status
        time.sleep(0.2)
    raise AssertionError(f"no resident process holds {index_dir}: {Endpoint.default().log_path.read_text()}")


def resident_pids(home: Path) -> list[str]:
    running = subprocess.run(["pgrep", "-f", "instemb_rag.resident$"], capture_output=True, text=True)
    return [pid for pid in running.stdout.split() if str(home) in _environ_of(pid)]


def test_index_leaves_the_process_holding_the_index_and_model(home, docs, tmp_path, tiny_model_dir):
    index_dir = tmp_path / "idx"
    result = index(docs, index_dir, tiny_model_dir)
    assert WARM_NOTE in result.stderr
    status = holding(index_dir)  # before any query
    assert status["models"] == [{"model": str(tiny_model_dir), "device": "auto"}]
    asked = query(index_dir, "--json")
    assert answer(asked)["hits"] and "note:" not in asked.stderr
    after = ResidentClient().status()
    assert after["pid"] == status["pid"] and after["indexes"] == status["indexes"]  # nothing opened again
    assert "warm" in Endpoint.default().log_path.read_text()


def test_a_query_right_after_index_waits_for_that_process(home, docs, tmp_path, tiny_model_dir):
    index_dir = tmp_path / "idx"
    index(docs, index_dir, tiny_model_dir)
    asked = query(index_dir, "--json")  # at once, as a script does: the process may still be starting
    assert answer(asked)["hits"] and "note:" not in asked.stderr
    holding(index_dir)
    assert len(resident_pids(home)) == 1


@pytest.mark.parametrize("how", ["--no-daemon", "INSTEMB_NO_DAEMON=1"])
def test_no_daemon_starts_nothing(home, docs, tmp_path, tiny_model_dir, how, monkeypatch):
    if how != "--no-daemon":
        monkeypatch.setenv("INSTEMB_NO_DAEMON", "1")
    result = index(docs, tmp_path / "idx", tiny_model_dir, *([how] if how == "--no-daemon" else []))
    assert WARM_NOTE not in result.stderr
    assert not Endpoint.default().log_path.exists()  # no helper was started, so nothing wrote there
    assert ResidentClient().status() is None


def test_a_process_that_cannot_start_costs_the_index_nothing(home, docs, tmp_path, tiny_model_dir, monkeypatch):
    monkeypatch.setenv("INSTEMB_DAEMON_IDLE", "soon")  # the process refuses to start
    result = index(docs, tmp_path / "idx", tiny_model_dir)
    assert WARM_NOTE in result.stderr and "Traceback" not in result.stderr
    log = Endpoint.default().log_path
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and "failed" not in (log.read_text() if log.exists() else ""):
        time.sleep(0.2)
    assert "warming" in log.read_text() and "failed" in log.read_text()
    assert ResidentClient().status() is None
    assert json.loads((tmp_path / "idx" / "manifest.json").read_text())  # the index is whole
