"""The resident query process (instemb_rag/resident/), driven as a user drives it: the real
`instemb-rag` command in subprocesses, a tiny model built in the test, an INSTEMB_HOME of the
test's own. Every test stops the process it started."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from instemb_rag.cli import app
from instemb_rag.resident.client import ResidentClient
from instemb_rag.resident.endpoint import Endpoint, Record, code_location

CLI = [sys.executable, "-m", "instemb_rag.cli"]
DOCS = {
    "tents/stormguard.md": "the tent is durable with a heavy nylon floor and strong poles for wind and rain .",
    "tents/featherlite.md": "a light tent , packed size small , weight under one kg for a trip .",
    "stoves/burner.md": "a gas stove with a burner that is good in cold wind .",
}


@pytest.fixture(scope="module")
def shared_home(tmp_path_factory):
    """An INSTEMB_HOME for this module's resident process, queries through it; stopped after."""
    home = tmp_path_factory.mktemp("resident") / "home"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("INSTEMB_HOME", str(home))
        patch.delenv("INSTEMB_NO_DAEMON", raising=False)
        patch.setenv("INSTEMB_DAEMON_IDLE", "300")
        yield home
        ResidentClient().stop()


@pytest.fixture()
def home(shared_home, tmp_path, monkeypatch):
    """A test's own INSTEMB_HOME (a process of its own, or none), stopped after."""
    monkeypatch.setenv("INSTEMB_HOME", str(tmp_path / "home"))
    yield tmp_path / "home"
    ResidentClient().stop()


@pytest.fixture(scope="module")
def tiny_index(tmp_path_factory, tiny_model_dir) -> Path:
    return build_docs_and_index(tmp_path_factory.mktemp("shared_index"), tiny_model_dir)


@pytest.fixture()
def own_index(tmp_path, tiny_model_dir) -> Path:
    """An index this test may change or delete."""
    return build_docs_and_index(tmp_path, tiny_model_dir)


def build_docs_and_index(folder: Path, model: Path) -> Path:
    docs = folder / "docs"
    for name, text in DOCS.items():
        (docs / name).parent.mkdir(parents=True, exist_ok=True)
        (docs / name).write_text(text)
    build(docs, folder / "idx", model)
    return folder / "idx"


def build(docs: Path, index_dir: Path, model: Path) -> None:
    """`instemb-rag index`, in this process (indexing never goes through the resident process);
    --no-daemon: these tests start the process with their queries (test_warm_after_index.py: without)."""
    result = CliRunner().invoke(
        app, ["index", str(docs), "--index-dir", str(index_dir), "--model", str(model), "--no-progress", "--no-daemon"]
    )
    assert result.exit_code == 0, result.output


def query(index_dir: Path, *options: str, env: dict | None = None, cwd: Path | None = None):
    """The real command in a subprocess, as a user runs it."""
    command = [*CLI, "query", "durable tent", "-i", "focus on the floor", "--index-dir", str(index_dir), *options]
    return subprocess.run(command, capture_output=True, text=True, env=env or os.environ.copy(), timeout=300, cwd=cwd)


def in_process(index_dir: Path, *options: str) -> dict:
    """The same query answered in this process (--no-daemon): the reference."""
    arguments = ["query", "durable tent", "-i", "focus on the floor", "--index-dir", str(index_dir), *options]
    result = CliRunner().invoke(app, [*arguments, "--no-daemon"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def answer(result) -> dict:
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_answers_equal_in_process_and_the_process_is_reused(shared_home, tiny_index):
    through = answer(query(tiny_index, "--json", "-k", "3"))
    status = ResidentClient().status()
    assert status is not None and status["indexes"][0]["index_dir"] == str(tiny_index)
    again = answer(query(tiny_index, "--json", "-k", "3"))
    assert through == again == in_process(tiny_index, "--json", "-k", "3")
    assert len(through["hits"]) == 3
    assert ResidentClient().status()["pid"] == status["pid"], "the second query started another process"


def test_filters_hybrid_and_table_output_match(shared_home, tiny_index):
    options = ("--json", "--filter", "source=tents/*", "--hybrid", "rrf", "--explain")
    assert answer(query(tiny_index, *options)) == in_process(tiny_index, *options)
    table = query(tiny_index)
    assert table.returncode == 0 and "stormguard.md" in table.stdout and "note:" not in table.stderr


def test_a_relative_index_dir_is_the_callers(shared_home, tiny_index):
    result = answer(query(Path(tiny_index.name), "--json", cwd=tiny_index.parent))
    assert {hit["source"] for hit in result["hits"]} <= set(DOCS)


def test_an_updated_index_is_seen_by_the_next_query(shared_home, own_index, tiny_model_dir):
    before = answer(query(own_index, "--json", "-k", "10"))
    assert len(before["hits"]) == 3
    docs = own_index.parent / "docs"
    (docs / "tents" / "ridge.md").write_text("a durable tent floor of heavy nylon .")
    build(docs, own_index, tiny_model_dir)
    after = answer(query(own_index, "--json", "-k", "10"))
    assert "tents/ridge.md" in {hit["source"] for hit in after["hits"]}
    assert after == in_process(own_index, "--json", "-k", "10")


def test_a_deleted_index_is_an_index_error_not_a_traceback(shared_home, own_index):
    answer(query(own_index, "--json"))
    import shutil

    shutil.rmtree(own_index)
    result = query(own_index)
    assert result.returncode == 4, result.stderr
    assert "No index in" in result.stderr and "Traceback" not in result.stderr


def test_the_process_never_writes_the_index(shared_home, tiny_index):
    files = {path: path.stat().st_mtime_ns for path in tiny_index.iterdir()}
    answer(query(tiny_index, "--json"))
    answer(query(tiny_index, "--json", "--hybrid", "z"))
    assert {path: path.stat().st_mtime_ns for path in tiny_index.iterdir() if path in files} == files


def test_two_queries_at_once_start_one_process(home, tiny_index):
    results: list = [None, None]

    def run(slot: int) -> None:
        results[slot] = query(tiny_index, "--json")

    threads = [threading.Thread(target=run, args=(slot,)) for slot in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert answer(results[0]) == answer(results[1])
    assert "note:" not in results[0].stderr + results[1].stderr
    running = subprocess.run(["pgrep", "-f", "instemb_rag.resident"], capture_output=True, text=True)
    mine = [pid for pid in running.stdout.split() if str(home) in _environ_of(pid)]
    assert len(mine) == 1, mine


def test_a_stale_socket_and_record_are_replaced(home, tiny_index):
    endpoint = Endpoint.default()
    endpoint.folder.mkdir(mode=0o700, parents=True)
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(endpoint.socket_path))
    stale.close()  # the file stays, nothing listens: a process killed with -9
    endpoint.write_record(Record(999_999, "0", code_location(), 0.0, 600.0, socket=str(endpoint.socket_path)))
    result = query(tiny_index, "--json")
    assert answer(result)["hits"] and "note:" not in result.stderr
    assert ResidentClient().status() is not None


def test_a_killed_process_is_replaced_by_the_next_query(shared_home, tiny_index):
    answer(query(tiny_index, "--json"))
    pid = ResidentClient().status()["pid"]
    os.kill(pid, signal.SIGKILL)
    result = query(tiny_index, "--json")
    assert answer(result)["hits"]
    assert ResidentClient().status()["pid"] != pid


def test_a_process_that_cannot_start_falls_back_in_process_with_one_note(home, tiny_index):
    env = {**os.environ, "INSTEMB_DAEMON_IDLE": "soon"}  # the process refuses to start
    result = query(tiny_index, "--json", env=env)
    assert answer(result)["hits"]
    assert result.stderr.count("note:") == 1 and "answering in this process" in result.stderr
    assert "INSTEMB_DAEMON_IDLE" in result.stderr and "Traceback" not in result.stderr


def test_a_hung_process_times_out_then_in_process(home, tiny_index):
    endpoint = Endpoint.default()
    endpoint.folder.mkdir(mode=0o700, parents=True)
    hung = socket.socket(socket.AF_UNIX)
    hung.bind(str(endpoint.socket_path))
    hung.listen(8)  # accepts connections into the backlog, never answers
    endpoint.write_record(Record(os.getpid(), "0", code_location(), 0.0, 600.0, socket=str(endpoint.socket_path)))
    try:
        started = time.monotonic()
        result = query(tiny_index, "--json")
        assert answer(result)["hits"]
        assert "does not answer" in result.stderr and "Traceback" not in result.stderr
        assert time.monotonic() - started < 60
    finally:
        hung.close()
        endpoint.record_path.unlink()


def test_a_folder_of_another_user_is_never_used(home, tiny_index):
    if not hasattr(os, "getuid") or os.getuid() != 0:
        pytest.skip("needs root to give the folder to another user")
    endpoint = Endpoint.default()
    endpoint.folder.mkdir(mode=0o700, parents=True)
    os.chown(endpoint.folder, 65534, 65534)
    result = query(tiny_index, "--json")
    assert answer(result)["hits"]
    said = " ".join(result.stderr.split())
    assert "belongs to user id 65534" in said and "answering in this process" in said
    os.chown(endpoint.folder, 0, 0)


def test_another_user_cannot_connect(home, tiny_index):
    if not hasattr(os, "getuid") or os.getuid() != 0:
        pytest.skip("needs root to act as another user")
    answer(query(tiny_index, "--json"))
    endpoint = Endpoint.default()
    assert oct(endpoint.folder.stat().st_mode & 0o777) == "0o700"
    assert oct(endpoint.socket_path.stat().st_mode & 0o777) == "0o600"
    probe = (
        "import os, socket, sys\n"
        "os.setgid(65534); os.setuid(65534)\n"
        "s = socket.socket(socket.AF_UNIX)\n"
        "try:\n    s.connect(sys.argv[1])\nexcept PermissionError:\n    sys.exit(13)\nsys.exit(0)\n"
    )
    result = subprocess.run([sys.executable, "-c", probe, str(endpoint.socket_path)], capture_output=True)
    assert result.returncode == 13, result.stderr


def test_idle_exit_and_daemon_commands(home, tiny_index):
    started = subprocess.run([*CLI, "daemon", "start", "--idle-timeout", "2"], capture_output=True, text=True)
    assert started.returncode == 0 and "started: pid" in started.stdout, started.stderr
    status = subprocess.run([*CLI, "daemon", "status", "--json"], capture_output=True, text=True)
    assert json.loads(status.stdout)["running"] is True
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and Endpoint.default().socket_path.exists():
        time.sleep(0.2)
    assert not Endpoint.default().socket_path.exists(), "the idle process did not exit"
    assert ResidentClient().status() is None
    assert "not running" in subprocess.run([*CLI, "daemon", "status"], capture_output=True, text=True).stdout
    assert "not running" in subprocess.run([*CLI, "daemon", "stop"], capture_output=True, text=True).stdout


def test_daemon_stop_ends_it(home, tiny_index):
    answer(query(tiny_index, "--json"))
    pid = ResidentClient().status()["pid"]
    stopped = subprocess.run([*CLI, "daemon", "stop"], capture_output=True, text=True)
    assert f"stopped (pid {pid})" in stopped.stdout
    assert ResidentClient().status() is None and not Endpoint.default().socket_path.exists()


def test_the_client_imports_no_torch(shared_home, tiny_index):
    answer(query(tiny_index, "--json"))  # the process is up
    probe = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from instemb_rag.cli import app\n"
        f"result = CliRunner().invoke(app, ['query', 'durable tent', '--index-dir', {str(tiny_index)!r}])\n"
        "assert result.exit_code == 0, result.output\n"
        "heavy = sorted(m for m in ('torch', 'transformers', 'faiss', 'numpy', 'llama_index', 'sentence_transformers')"
        " if m in sys.modules)\n"
        "print(heavy)\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def _environ_of(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace")
    except OSError:
        return ""


def test_mcp_tools_through_the_sdk_client(shared_home, tiny_index):
    """`instemb-rag mcp` driven by the MCP SDK's own stdio client: the search tool answers what
    `query --json` answers (through the resident process), list_indexed names the files, and a bad
    argument is a tool error the agent can read."""
    mcp = pytest.importorskip("mcp", reason="the mcp extra is not installed")
    import anyio

    expected = answer(query(tiny_index, "--json", "-k", "2"))
    server = mcp.StdioServerParameters(
        command=sys.executable,
        args=["-m", "instemb_rag.cli", "mcp", "--index-dir", str(tiny_index)],
        env={key: os.environ[key] for key in ("INSTEMB_HOME", "INSTEMB_DAEMON_IDLE", "PATH")},
    )

    async def drive() -> tuple:
        async with mcp.stdio_client(server) as (read, write), mcp.ClientSession(read, write) as session:
            await session.initialize()
            names = {tool.name for tool in (await session.list_tools()).tools}
            found = await session.call_tool(
                "search", {"query": "durable tent", "instruction": "focus on the floor", "top_k": 2}
            )
            listed = await session.call_tool("list_indexed", {})
            refused = await session.call_tool("search", {"query": "  "})
            return names, found, listed, refused

    names, found, listed, refused = anyio.run(drive)
    assert names == {"search", "list_indexed"}
    hits = found.structured_content["hits"]
    assert [(hit["source"], hit["score"]) for hit in hits] == [
        (hit["source"], round(hit["score"], 6)) for hit in expected["hits"]
    ]
    assert sorted(listed.structured_content["files"]) == sorted(DOCS)
    assert refused.is_error and "empty" in refused.content[0].text.lower()


def test_a_shortened_instruction_is_said_through_the_resident_process(
    shared_home, tiny_model_dir, tiny_st_dir, tmp_path
):
    """The sentence encoder's notice (issue 63 item 1) is raised inside the resident process: it
    comes back with the answer and is printed as the command's note, every time it applies."""
    from instemb_rag.encoder.load import untrained_effect

    untrained_effect(str(tiny_model_dir), str(tiny_st_dir), device="cpu", lookahead_length=2).save(tmp_path / "model")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "tent.txt").write_text("the tent floor and seam are durable in rain .")
    result = CliRunner().invoke(
        app,
        [
            "index",
            str(docs),
            "--index-dir",
            str(tmp_path / "idx"),
            "--model",
            str(tmp_path / "model"),
            "--no-progress",
            "--chunk-overlap",
            "8",
        ],
    )
    assert result.exit_code == 0, result.output
    long_instruction = "what a good tent is about on a long trip in the cold . " * 30 + "focus on the floor ."
    command = [*CLI, "query", "durable tent", "-i", long_instruction, "--index-dir", str(tmp_path / "idx")]
    for _ in range(2):  # a long-lived process says it each time, not once per source line
        said = subprocess.run(command, capture_output=True, text=True, timeout=300)
        assert said.returncode == 0, said.stderr
        flat = " ".join(said.stderr.split())
        assert "note: the instruction and the query are longer than the sentence encoder" in flat, said.stderr
        assert "answering in this process" not in flat and "Warning" not in flat
