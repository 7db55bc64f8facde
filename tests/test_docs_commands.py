"""Every command the README and the docs/ pages show runs as written, as far as can be checked
without running it: each `instemb-rag ...` (also under `python -m instemb_rag.cli` and
`torchrun`) parses against the typer app (its subcommand exists, its options are known and
their values valid), each `python -m MODULE` names a module that exists, each `bash FILE` and
`python FILE` a file of the checkout, and each `--config` recipe a file that exists.

Read: shell blocks (```bash, ```sh, ```shell) and inline code that starts with `instemb-rag `.
Left out: docs/dev/, dated reports of past runs, whose commands record what was run then.
"""

from __future__ import annotations

import importlib.util
import re
import shlex
from pathlib import Path

import pytest
import typer

from instemb_rag.cli import app

ROOT = Path(__file__).resolve().parents[1]
PAGES = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    ROOT / "integrations" / "llama-index-embeddings-instemb" / "README.md",
]
CLI_NAMES = {"instemb-rag", ".venv/bin/instemb-rag"}
PYTHONS = {"python", "python3", ".venv/bin/python"}


def shell_lines(text: str) -> list[tuple[str, bool]]:
    """(command line, whole): shell blocks, continuations joined (whole commands), and inline
    `instemb-rag ...` in prose (a command named, perhaps with placeholders)."""
    lines = []
    for block in re.findall(r"```(?:bash|sh|shell)\n(.*?)```", text, flags=re.DOTALL):
        lines += [(line, True) for line in block.replace("\\\n", " ").splitlines() if line.strip()]
    prose = re.sub(r"```.*?```", "", text, flags=re.DOTALL)
    lines += [(" ".join(span.split()), False) for span in re.findall(r"`(instemb-rag [^`]+)`", prose)]
    return lines


def commands(line: str) -> list[list[str]]:
    """The commands of one line (split at &&, ||, ;, |), without leading VAR=value assignments;
    after a `cd DIR` the .py and .sh files named are read as DIR/FILE."""
    line = re.sub(r"<[^<>]+>", "PLACEHOLDER", line)  # <the dense run>: one argument written in words
    try:
        tokens = shlex.split(line, comments=True)
    except ValueError as error:
        raise AssertionError(f"cannot split {line!r}: {error}") from None
    found, current, folder = [], [], ""
    for token in [*tokens, ";"]:
        if token in {"&&", "||", ";", "|"}:
            while current and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", current[0]):
                current.pop(0)
            if current[:1] == ["cd"] and len(current) == 2:
                folder = current[1].rstrip("/") + "/"  # `cd benchmarks && python x.py`: x.py is there
            elif current:
                found.append(
                    [current[0], *[folder + arg if arg.endswith((".py", ".sh")) else arg for arg in current[1:]]]
                )
            current = []
        else:
            current.append(token)
    return found


def cli_arguments(command: list[str]) -> list[str] | None:
    """The arguments after `instemb-rag` when the command runs the CLI, else None."""
    if command[0] in CLI_NAMES:
        return command[1:]
    if "-m" in command and command[0] in PYTHONS | {"torchrun"}:
        position = command.index("-m")
        if command[position + 1 : position + 2] == ["instemb_rag.cli"]:
            return command[position + 2 :]
    return None


def parse_problem(arguments: list[str], whole: bool = True) -> str | None:
    """Why `instemb-rag ARGUMENTS` would not parse (None: it parses). Nothing runs.

    ``whole=False`` (a command named in prose, its arguments left out or written as placeholders):
    only the subcommand and the options named are checked."""
    group = typer.main.get_command(app)
    command, rest, names = group, list(arguments), ["instemb-rag"]
    while hasattr(command, "commands") and rest and not rest[0].startswith("-"):
        if rest[0] not in command.commands:
            return f"no command {' '.join(names)} {rest[0]}"
        names.append(rest.pop(0))
        command = command.commands[names[-1]]
    if hasattr(command, "commands"):
        return None if rest in ([], ["--help"]) or not whole else f"{' '.join(names)} needs a subcommand"
    if not whole:
        known = {name for param in command.params for name in (*param.opts, *param.secondary_opts)} | {"--help"}
        unknown = [token for token in rest if re.fullmatch(r"--[a-z][a-z0-9-]*", token) and token not in known]
        return f"{' '.join(names)} has no option {', '.join(unknown)}" if unknown else None
    try:
        command.make_context(" ".join(names), list(rest))  # the parser consumes the list it is given
    except Exception as error:  # typer's click: NoSuchOption, BadParameter, MissingParameter, ...
        return error.format_message() if hasattr(error, "format_message") else str(error)
    if "--config" in rest:
        config = rest[rest.index("--config") + 1]
        if config.startswith("instemb_rag/") and not (ROOT / config).is_file():
            return f"--config {config} does not exist"
    return None


def problem(command: list[str], whole: bool = True) -> str | None:
    arguments = cli_arguments(command)
    if arguments is not None:
        return parse_problem(arguments, whole)
    if command[0] in PYTHONS and command[1:2] == ["-m"]:
        module = command[2]
        return None if importlib.util.find_spec(module) is not None else f"no module {module}"
    if command[0] in PYTHONS | {"bash"} and len(command) > 1 and command[1].endswith((".py", ".sh")):
        return None if (ROOT / command[1]).is_file() else f"no file {command[1]}"
    return None  # pip, cat, curl, ...: not this project's to check


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_every_command_a_page_shows_runs_as_written(page):
    problems = [
        f"{line!r}: {found}"
        for line, whole in shell_lines(page.read_text(encoding="utf-8"))
        for command in commands(line)
        if (found := problem(command, whole))
    ]
    assert problems == []


def test_the_checker_catches_what_it_should():
    assert parse_problem(["query", "tent", "--instruction", "focus on weight", "--hybrid"]) is None
    assert "No such option" in parse_problem(["query", "tent", "--bogus"])
    assert "bogus" in parse_problem(["index", "docs/", "--store", "bogus"])
    assert parse_problem(["serach", "tent"]) == "no command instemb-rag serach"
    assert parse_problem(["query"]).startswith("Missing argument")
    assert parse_problem(["query"], whole=False) is None  # named in prose
    assert parse_problem(["query", "TEXT", "--hybird"], whole=False) == "instemb-rag query has no option --hybird"
    assert parse_problem(["teachers", "install", "minilm"]) is None
    assert "does not exist" in parse_problem(["train", "--config", "instemb_rag/training/recipes/absent.yaml"])
    assert problem(["bash", "scripts/absent.sh"]) == "no file scripts/absent.sh"
    assert problem(["python", "-m", "instemb_rag.absent"]) == "no module instemb_rag.absent"
    assert commands("INSTEMB_HOME=/tmp/x instemb-rag demo && bash scripts/test.sh  # both") == [
        ["instemb-rag", "demo"],
        ["bash", "scripts/test.sh"],
    ]
