"""The lean client (instemb_rag/cli/entry.py, issue 70 item 1): a warm `instemb-rag query` answered
by the resident process without typer, pydantic or rich, printing what the typer app prints.

Each case runs both paths as a user does, in subprocesses: the full one (the typer app,
INSTEMB_FULL_CLI=1) and the lean one, either the console script's entry (`python -m
instemb_rag.cli`) or ``lean_query`` alone in a probe, which says whether it answered itself and
which modules it imported. A tiny model, an INSTEMB_HOME of this module's own, its process
stopped after."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from instemb_rag.cli.entry import FULL_CLI_ENV
from instemb_rag.resident.client import ResidentClient

from .test_resident import CLI, build_docs_and_index

# Modules a warm query's client must not import; with a table, rich is what draws it.
HEAVY = ("typer", "pydantic", "click", "rich", "numpy", "torch", "transformers", "faiss", "fastapi")
PROBE = (
    "import json, os, sys\n"
    "from instemb_rag.cli.entry import lean_query\n"
    "code = lean_query(sys.argv[1:])\n"
    "sys.stdout.flush()\n"
    "heavy = sorted(name for name in json.loads(os.environ['HEAVY']) if name in sys.modules)\n"
    "with open(os.environ['PROBE_OUT'], 'w') as out:\n"
    "    json.dump({'code': code, 'heavy': heavy}, out)\n"
    "sys.exit(99 if code is None else code)\n"
)


@pytest.fixture(scope="module")
def warm(tmp_path_factory, tiny_model_dir):
    """An index, and a resident process up (started by a query of the typer app's)."""
    folder = tmp_path_factory.mktemp("lean")
    index_dir = build_docs_and_index(folder, tiny_model_dir)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("INSTEMB_HOME", str(folder / "home"))
        patch.delenv("INSTEMB_NO_DAEMON", raising=False)
        patch.setenv("INSTEMB_DAEMON_IDLE", "300")
        started = full(index_dir, "--json")
        assert started.returncode == 0 and "note:" not in started.stderr, started.stderr
        assert ResidentClient().status() is not None
        yield index_dir
        ResidentClient().stop()


def environment(full_path: bool, columns: str | None = None, **extra: str) -> dict:
    env = {key: value for key, value in os.environ.items() if key not in (FULL_CLI_ENV, "COLUMNS")}
    if full_path:
        env[FULL_CLI_ENV] = "1"
    if columns is not None:
        env["COLUMNS"] = columns
    return {**env, **extra}


def command_line(index_dir: Path | None, *options: str) -> list[str]:
    """`query "durable tent" -i ... --index-dir DIR OPTIONS` (no index dir: OPTIONS alone)."""
    if index_dir is None:
        return ["query", *options]
    return ["query", "durable tent", "-i", "focus on the floor", "--index-dir", str(index_dir), *options]


def full(index_dir: Path | None, *options: str, columns: str | None = None):
    """The typer app's answer (the path as it was before the lean client)."""
    arguments = [*CLI, *command_line(index_dir, *options)]
    return subprocess.run(arguments, capture_output=True, text=True, env=environment(True, columns), timeout=300)


def entry(index_dir: Path | None, *options: str, columns: str | None = None):
    """The console script's entry: the lean client, handing over what it does not answer."""
    arguments = [*CLI, *command_line(index_dir, *options)]
    return subprocess.run(arguments, capture_output=True, text=True, env=environment(False, columns), timeout=300)


def lean(index_dir: Path | None, *options: str, columns: str | None = None, tmp_path: Path):
    """``lean_query`` alone: its output, and whether it answered (its exit code, or None: handed
    over) with which of HEAVY imported."""
    out = tmp_path / "probe.json"
    env = environment(False, columns, HEAVY=json.dumps(HEAVY), PROBE_OUT=str(out))
    arguments = [sys.executable, "-c", PROBE, *command_line(index_dir, *options)[1:]]
    result = subprocess.run(arguments, capture_output=True, text=True, env=env, timeout=300)
    assert out.exists(), result.stderr
    return result, json.loads(out.read_text())


def same(one, other) -> None:
    assert (one.returncode, one.stdout, one.stderr) == (other.returncode, other.stdout, other.stderr)


@pytest.mark.parametrize(
    "options, columns",
    [
        (("--json",), None),
        (("--json", "-k", "2", "--explain", "--hybrid"), None),
        (("--json", "--filter", "source=tents/*", "--hybrid", "rrf", "--hybrid-weight", "0.3"), None),
        ((), None),  # a table where no terminal is: 80 columns, one block per hit
        ((), "200"),  # wide enough for the table
        (("--explain", "--hybrid", "-k", "2"), "200"),
    ],
    ids=["json", "json-explain-hybrid", "json-filter-rrf", "table-80", "table-200", "table-explain"],
)
def test_a_warm_query_prints_what_the_typer_app_prints(warm, options, columns, tmp_path):
    result, probe = lean(warm, *options, columns=columns, tmp_path=tmp_path)
    assert probe["code"] == 0, result.stderr  # answered by the lean client itself
    reference = full(warm, *options, columns=columns)
    same(result, reference)
    assert reference.returncode == 0 and "durable" in reference.stdout and "note:" not in reference.stderr
    assert probe["heavy"] == ([] if "--json" in options else ["rich"])
    if "--json" in options:
        assert json.loads(result.stdout)["hits"]


def test_the_console_scripts_entry_answers_warm_as_the_typer_app(warm):
    same(entry(warm, "--json", "-k", "3"), full(warm, "--json", "-k", "3"))


def test_the_console_scripts_entry_imports_no_typer_pydantic_or_rich(warm):
    """`python -X importtime -m instemb_rag.cli query ... --json`: every module it imported, by name."""
    arguments = [sys.executable, "-X", "importtime", "-m", "instemb_rag.cli", *command_line(warm, "--json")]
    result = subprocess.run(arguments, capture_output=True, text=True, env=environment(False), timeout=300)
    assert result.returncode == 0 and json.loads(result.stdout)["hits"], result.stderr[-2000:]
    imported = {
        line.rsplit("|", 1)[1].strip() for line in result.stderr.splitlines() if line.startswith("import time:")
    }
    assert "instemb_rag.resident.client" in imported  # the check reads the import lines
    assert sorted({name.split(".")[0] for name in imported} & set(HEAVY)) == []


def test_a_missing_index_is_the_same_error_and_exit_code(warm, tmp_path):
    missing = tmp_path / "no-index"
    result, probe = lean(missing, "--json", tmp_path=tmp_path)
    assert probe == {"code": 4, "heavy": []}  # said by the lean client, as the typer app says it
    reference = full(missing, "--json")
    same(result, reference)
    assert reference.returncode == 4 and reference.stderr.startswith("error: No index in")
    same(entry(missing), full(missing))


def test_an_empty_query_is_the_same_refusal(warm, tmp_path):
    out = tmp_path / "probe.json"
    env = environment(False, None, HEAVY=json.dumps(HEAVY), PROBE_OUT=str(out))
    arguments = [sys.executable, "-c", PROBE, "  ", "--index-dir", str(warm)]
    result = subprocess.run(arguments, capture_output=True, text=True, env=env, timeout=300)
    assert json.loads(out.read_text())["code"] == 2
    reference = subprocess.run(
        [*CLI, "query", "  ", "--index-dir", str(warm)], capture_output=True, text=True, env=environment(True)
    )
    same(result, reference)
    assert "empty" in reference.stderr


def test_a_knob_the_model_lacks_is_the_same_refusal(warm, tmp_path):
    result, probe = lean(warm, "--llm-weight", "0.5", tmp_path=tmp_path)
    assert probe["code"] == 2  # the resident process refuses it: said here
    same(result, full(warm, "--llm-weight", "0.5"))


@pytest.mark.parametrize(
    "options",
    [
        ("-k", "0"),
        ("--hybrid-weight", "2"),
        ("--llm-weight", "11"),
        ("--hybrid", "Z"),
        ("--filter", "nonsense"),  # read by the command's request: the typer app says it
        ("--help",),
        ("--nope",),
        ("-k",),
    ],
    ids=["k-0", "hybrid-weight-2", "llm-weight-11", "hybrid-Z", "filter", "help", "unknown", "no-value"],
)
def test_bad_input_is_handed_over_and_said_as_before(warm, options, tmp_path):
    result, probe = lean(warm, *options, tmp_path=tmp_path)
    assert probe["code"] is None and result.stdout == result.stderr == ""  # nothing said before handing over
    same(entry(warm, *options), full(warm, *options))


@pytest.mark.parametrize("options", [(), ("--json",), ("--help",), ("-i", "x")])
def test_a_missing_argument_is_said_as_before(warm, options):
    result = entry(None, *options)
    same(result, full(None, *options))
    assert result.returncode == (0 if "--help" in options else 2)


def test_without_a_process_the_lean_client_starts_nothing(warm, tmp_path):
    """No process up: handed over (the typer app starts one and says so where it cannot)."""
    home = tmp_path / "home"
    out = tmp_path / "probe.json"
    env = environment(False, None, INSTEMB_HOME=str(home), HEAVY=json.dumps(HEAVY), PROBE_OUT=str(out))
    arguments = [sys.executable, "-c", PROBE, *command_line(warm, "--json")[1:]]
    result = subprocess.run(arguments, capture_output=True, text=True, env=env, timeout=300)
    assert json.loads(out.read_text())["code"] is None and result.stdout == result.stderr == ""
    assert not (home / "daemon" / "endpoint.json").exists()
