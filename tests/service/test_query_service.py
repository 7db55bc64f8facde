"""The query service (instemb_rag/service/, issue 68 item 1): every entry point answers a request
through it, so the same request gives the same hits and scores from each; and a field declared
once in ``QueryRequest`` reaches every door (the command line, the HTTP schema and the resident
process's request that extends it, the MCP tool).

A tiny random Llama built in the test, its index built by the real `instemb-rag index`; the
resident query process is the real one (a subprocess, stopped after), under an INSTEMB_HOME of the
test's own."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from instemb_rag.cli import app
from instemb_rag.cli.entry import lean_query
from instemb_rag.cli.entry import main as console_script
from instemb_rag.resident.client import ResidentClient
from instemb_rag.service.request import QueryRequest, declared, declared_fields, declared_parameters

DOCS = {
    "tents/stormguard.md": "the tent is durable with a heavy nylon floor and strong poles for wind and rain .",
    "tents/featherlite.md": "a light tent , packed size small , weight under one kg for a trip .",
    "stoves/burner.md": "a gas stove with a burner that is good in cold wind .",
    "stoves/alpine.md": "an alpine stove , light and packed small , burns gas in the cold .",
}
QUERY, INSTRUCTION, K = "durable tent", "focus on the floor", 3
REQUESTS = {"dense": None, "hybrid": "rrf"}
ENTRY_POINTS = ["cli", "resident", "lean_client", "serve", "mcp", "index_search", "llamaindex"]


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory, tiny_model_dir) -> Path:
    folder = tmp_path_factory.mktemp("service")
    for name, text in DOCS.items():
        (folder / "docs" / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / "docs" / name).write_text(text)
    arguments = ["index", str(folder / "docs"), "--index-dir", str(folder / "idx"), "--model", str(tiny_model_dir)]
    result = CliRunner().invoke(app, [*arguments, "--no-progress"])
    assert result.exit_code == 0, result.output
    return folder / "idx"


@pytest.fixture(scope="module")
def resident_home(tmp_path_factory):
    """An INSTEMB_HOME for this module's resident process; stopped after."""
    home = tmp_path_factory.mktemp("service_home") / "home"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("INSTEMB_HOME", str(home))
        patch.delenv("INSTEMB_NO_DAEMON", raising=False)
        patch.setenv("INSTEMB_DAEMON_IDLE", "300")
        yield home
        ResidentClient().stop()


@dataclass(frozen=True)
class Found:
    source: str
    chunk_id: int
    score: float


def reference(index_dir: Path, hybrid: str | None) -> list[Found]:
    from instemb_rag.index import Index

    with Index.open(index_dir, device="cpu") as index:
        hits = index.search(QUERY, INSTRUCTION, k=K, hybrid=hybrid)
    return [Found(hit.source, hit.chunk_id, hit.score) for hit in hits]


def from_document(document: dict) -> list[Found]:
    return [Found(hit["source"], hit["chunk_id"], hit["score"]) for hit in document["hits"]]


def cli_options(hybrid: str | None) -> list[str]:
    return [QUERY, "-i", INSTRUCTION, "-k", str(K), "--json", "--device", "cpu"] + (
        ["--hybrid", hybrid] if hybrid else []
    )


def through_cli(index_dir: Path, hybrid: str | None, request) -> list[Found]:
    arguments = ["query", *cli_options(hybrid), "--index-dir", str(index_dir), "--no-daemon"]
    result = CliRunner().invoke(app, arguments, env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return from_document(json.loads(result.stdout))


def through_resident(index_dir: Path, hybrid: str | None, request) -> list[Found]:
    request.getfixturevalue("resident_home")
    command = [sys.executable, "-m", "instemb_rag.cli", "query", *cli_options(hybrid), "--index-dir", str(index_dir)]
    done = subprocess.run(command, capture_output=True, text=True, env=os.environ.copy(), timeout=300)
    assert done.returncode == 0, done.stderr
    assert ResidentClient().status() is not None, "the query was not answered by the resident process"
    return from_document(json.loads(done.stdout))


def through_lean_client(index_dir: Path, hybrid: str | None, request) -> list[Found]:
    """The console script's lean client (cli/entry.py), as a user types the query: no --device
    (an option the typer command checks itself), the resident process up."""
    through_resident(index_dir, hybrid, request)  # the resident process up, this index open
    arguments = [QUERY, "-i", INSTRUCTION, "-k", str(K), "--json", "--index-dir", str(index_dir)]
    arguments += ["--hybrid", hybrid] if hybrid else []
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert lean_query(arguments) == 0, "the lean client handed the query over"
    return from_document(json.loads(printed.getvalue()))


def through_serve(index_dir: Path, hybrid: str | None, request) -> list[Found]:
    from fastapi.testclient import TestClient

    from instemb_rag.serve import ServeOptions, ServerState, create_app

    state = ServerState.open(ServeOptions(), index_dir=index_dir, device="cpu")
    with TestClient(create_app(state)) as client:
        body = {"query": QUERY, "instruction": INSTRUCTION, "k": K, "hybrid": hybrid}
        response = client.post("/v1/search", json=body)
    assert response.status_code == 200, response.text
    return from_document(response.json())


def through_mcp(index_dir: Path, hybrid: str | None, request) -> list[Found]:
    """The MCP tool as the SDK calls it (its arguments validated against the tool's schema)."""
    pytest.importorskip("mcp", reason="the mcp extra is not installed")
    from instemb_rag.agents.mcp_server import IndexTools, build_server

    tools = IndexTools(index_dir, use_resident=False)
    server = build_server(tools)
    arguments = {"query": QUERY, "instruction": INSTRUCTION, "top_k": K, "hybrid": hybrid}
    try:
        result = asyncio.run(server.call_tool("search", arguments))
    finally:
        tools.asker.close()
    document = result.structured_content
    # The tool's snippet in place of the text: compare by source and score (the chunk id is not shown).
    found = [Found(hit["source"], 0, hit["score"]) for hit in document["hits"]]
    return found


def through_index_search(index_dir: Path, hybrid: str | None, request) -> list[Found]:
    return reference(index_dir, hybrid)


def through_llamaindex(index_dir: Path, hybrid: str | None, request) -> list[Found]:
    pytest.importorskip("llama_index.core", reason="the LlamaIndex integration is not installed")
    from llama_index.embeddings.instemb import InstEmbRetriever

    with InstEmbRetriever.from_instemb_index(index_dir, similarity_top_k=K, hybrid=hybrid, device="cpu") as retriever:
        nodes = retriever.retrieve(QUERY, instruction=INSTRUCTION)
    return [Found(node.node.metadata["source"], node.node.metadata["chunk_id"], node.score) for node in nodes]


@pytest.mark.parametrize("kind", list(REQUESTS))
@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_every_entry_point_gives_the_same_hits_and_scores(entry, kind, index_dir, request):
    hybrid = REQUESTS[kind]
    expected = reference(index_dir, hybrid)
    got = globals()[f"through_{entry}"](index_dir, hybrid, request)
    assert len(got) == K
    assert [hit.source for hit in got] == [hit.source for hit in expected]
    if entry != "mcp":
        assert [hit.chunk_id for hit in got] == [hit.chunk_id for hit in expected]
    assert [hit.score for hit in got] == pytest.approx([hit.score for hit in expected], abs=1e-5)


# ------------------------------------------------------------------ one declaration, every door


@dataclass(frozen=True)
class RequestWithAStep(QueryRequest):
    """A request with one more field, declared as the next one will be (rerank and rerank_top were)."""

    diversify_top: int | None = declared(None, "Diversify the best N hits.", low=1)


def test_a_declared_field_becomes_a_command_line_option_and_reaches_the_command():
    import typer

    received = []

    def option(spec):
        return typer.Option(spec.default, spec.option, help=spec.door.help, min=spec.door.low, max=spec.door.high)

    @declared_parameters(
        option,
        spelled=("query", "instruction", "k", "filter", "hybrid", "hybrid_weight", "explain", "rerank", "rerank_top"),
        request=RequestWithAStep,
    )
    def command(text: str = typer.Argument(...), declared: dict = None, k: int = typer.Option(3, "-k")):
        received.append((text, dict(declared), k))

    cli = typer.Typer()
    cli.command()(command)
    cli.command("other")(lambda: None)
    runner = CliRunner()
    assert runner.invoke(cli, ["command", "tent", "--diversify-top", "7"]).exit_code == 0
    assert received == [("tent", {"diversify_top": 7}, 3)]
    refused = runner.invoke(cli, ["command", "tent", "--diversify-top", "0"])
    assert refused.exit_code == 2 and len(received) == 1
    assert "Diversify the best N hits." in runner.invoke(cli, ["command", "--help"]).output


def test_every_declared_field_is_a_field_of_the_http_schema_the_resident_request_and_the_mcp_tool(tmp_path):
    from instemb_rag.resident.app import ResidentSearchRequest
    from instemb_rag.serve.schemas import SearchRequest

    names = [spec.name for spec in declared_fields()]
    assert {"query", "instruction", "k", "filter", "hybrid", "hybrid_weight", "explain"} <= set(names)
    for schema in (SearchRequest, ResidentSearchRequest):
        assert set(names) <= set(schema.model_fields)
        assert all(schema.model_fields[spec.name].description == spec.door.help for spec in declared_fields())
    assert QueryRequest(query="x", k=2, hybrid="z").wire() == {
        **{spec.name: spec.default for spec in declared_fields()},
        "query": "x",
        "k": 2,
        "hybrid": "z",
    }
    mcp = pytest.importorskip("mcp", reason="the mcp extra is not installed")
    assert mcp
    from instemb_rag.agents.mcp_server import SPELLED_BY_THE_TOOL, IndexTools, build_server
    from instemb_rag.knobs import KNOBS

    (tool,) = [tool for tool in asyncio.run(build_server(IndexTools(tmp_path)).list_tools()) if tool.name == "search"]
    parameters = set(tool.input_schema["properties"])
    assert (set(names) - set(SPELLED_BY_THE_TOOL)) | set(KNOBS) <= parameters  # MCP takes the knobs too


# ------------------------------------------------------------------ the query's way, measured

PACKAGE = Path(__file__).resolve().parents[2] / "instemb_rag"
# What the way ends at, not counted: the encoder, the store (and the catalog it reads), and the
# base utilities every layer calls (tests/test_layout.py's layer 0).
NOT_THE_WAY = ("encoder/", "index/stores/", "index/catalog.py", "index/fulltext.py")
# Issue 68 asks for at most 9. The default route is the console script's lean client (cli/entry.py,
# issue 70), which asks the resident process without the typer command and its option layers: 7.
MOST_FILES = 9


# Where a query is handed on: to the encoder or the store (the way's ends), to another thread (the
# index's, the batcher's loop) or to another process (the resident one, over its socket).
HAND_OFFS = {("concurrent/futures/thread.py", "submit"), ("asyncio/tasks.py", "run_coroutine_threadsafe")}
HAND_OFFS |= {("http/client.py", "request")}


class Recorder:
    """While ``recording`` (every thread: the resident process answers on its index thread and
    embeds on its batcher's): the call path, as the product files on the stack wherever the query
    is handed on (``way``); every product file whose code runs (``files``); and where
    ``normalize_instruction`` is called from."""

    def __init__(self):
        from test_layout import LAYERS

        self.base = {f"{name}.py" for name in LAYERS[0]}
        self.recording, self.files, self.normalised_from, self.on_the_way = False, set(), [], set()

    def product(self, frame) -> str | None:
        path = frame.f_code.co_filename
        return Path(path).relative_to(PACKAGE).as_posix() if path.startswith(str(PACKAGE)) else None

    def __call__(self, frame, event, arg):
        if event != "call" or not self.recording:
            return
        here, caller = self.product(frame), self.product(frame.f_back) if frame.f_back else None
        code = frame.f_code
        # The encoder reached (its protocol.py helpers, which say what a model takes, are asked on the way).
        reached = here is not None and here.startswith(NOT_THE_WAY) and not (caller or "").startswith(NOT_THE_WAY)
        reached = reached and here != "encoder/protocol.py"
        if reached or any(code.co_filename.endswith(f) and code.co_name == name for f, name in HAND_OFFS):
            self.record_stack(frame.f_back)
        if here is None:
            return
        self.files.add(here)
        if code.co_name == "normalize_instruction":
            below = frame.f_back  # the caller, past instructions.py's own (per_item_instructions, its listcomp)
            while self.product(below) == "instructions.py":
                below = below.f_back
            self.normalised_from.append(self.product(below))

    def record_stack(self, frame) -> None:
        while frame is not None:
            found = self.product(frame)
            if found is not None and not found.startswith(NOT_THE_WAY) and found not in self.base:
                self.on_the_way.add(found)
            frame = frame.f_back

    @property
    def way(self) -> list[str]:
        return sorted(self.on_the_way)

    def __enter__(self):
        import threading

        threading.setprofile(self)
        sys.setprofile(self)
        return self

    def __exit__(self, *exc):
        import threading

        sys.setprofile(None)
        threading.setprofile(None)


def test_the_default_route_crosses_at_most_nine_files_and_normalises_the_instruction_once(index_dir, resident_home):
    """The default route: `instemb-rag query` (the console script's entry, in this process) asks the
    resident process (its app in this process here, to see inside it: the same code the subprocess
    runs), which answers through the query service. Warm: the second query of each is recorded."""
    from fastapi.testclient import TestClient

    from instemb_rag.resident.app import ResidentState, create_resident_app

    # As a user types it (no --device: an option with its own check is the typer app's to read).
    arguments = ["query", QUERY, "-i", INSTRUCTION, "-k", str(K), "--json", "--index-dir", str(index_dir)]
    command, resident = Recorder(), Recorder()
    for recorder in (command, resident):
        recorder.recording = False
    assert CliRunner().invoke(app, arguments).exit_code == 0  # starts the resident process: warm after
    printed = io.StringIO()
    with command, contextlib.redirect_stdout(printed):  # the console script, as `instemb-rag query` runs it
        command.recording = True
        code = console_script(arguments)
        command.recording = False
    assert code == 0, printed.getvalue()
    assert ResidentClient().status() is not None
    from instemb_rag.resident.ask import resident_request

    body = resident_request(QueryRequest(QUERY, INSTRUCTION, k=K, index_dir=str(index_dir), device="cpu"))
    with resident, TestClient(create_resident_app(ResidentState(idle_timeout=300))) as client:
        assert client.post("/v1/resident/search", json=body).status_code == 200
        resident.recording = True
        answered = client.post("/v1/resident/search", json=body)
        resident.recording = False
    assert answered.status_code == 200, answered.text
    assert from_document(answered.json()["answer"]) == from_document(json.loads(printed.getvalue()))
    way = sorted(set(command.way) | set(resident.way))
    print(f"the default route: {len(way)} files on the way {way}; {len(command.files | resident.files)} run")
    assert way == sorted(
        ["cli/entry.py", "resident/client.py"]  # the command's process: the lean client (issue 70)
        + ["resident/app.py", "serve/search.py", "serve/batching.py", "service/answer.py", "index/search.py"]
    )
    assert len(way) <= MOST_FILES
    # The instruction is normalised once on the way: where the service checks the query (queries.py);
    # the encoder's own guard, for code that calls it directly, applies the same rule again.
    assert [where for where in resident.normalised_from if not where.startswith("encoder/")] == ["queries.py"]
    assert [where for where in command.normalised_from if not where.startswith("encoder/")] == []


def test_index_search_normalises_the_instruction_once_on_the_way(index_dir):
    from instemb_rag.index import Index

    with Index.open(index_dir, device="cpu") as index, Recorder() as recorder:
        index.search(QUERY, INSTRUCTION, k=K)  # warm
        recorder.recording = True
        index.search(QUERY, INSTRUCTION, k=K, hybrid="rrf")
        recorder.recording = False
    assert [where for where in recorder.normalised_from if not where.startswith("encoder/")] == ["queries.py"]
    assert recorder.way == ["index/search.py", "service/answer.py"], recorder.way
