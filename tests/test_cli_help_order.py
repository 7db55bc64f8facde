"""`instemb-rag --help` lists a user's commands first, and usage lines name arguments in the usual
form (issue 63 item 5): a new user reads index, query and demo before seven training commands,
and `instemb-rag query [OPTIONS] TEXT`, not `{text}`."""

from __future__ import annotations

import re

from typer.testing import CliRunner

from instemb_rag.cli import app

runner = CliRunner()
SEARCH = {"index", "query", "demo", "serve", "daemon", "mcp"}


def help_of(*path: str) -> str:
    result = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    return result.output


def listed_commands(output: str) -> list[tuple[str, str]]:
    """(section, command) in the order the top-level help lists them."""
    listed, section = [], None
    for line in output.splitlines():
        if re.match(r"^\S.*:$", line):
            section = line[:-1]
        elif section not in (None, "Options") and re.match(r"^  (\S+)", line):
            listed.append((section, line.split()[0]))
    return listed


def test_the_search_commands_come_first_in_a_section_of_their_own():
    listed = listed_commands(help_of())
    assert listed[0][0] == "Search"
    search = [name for section, name in listed if section == "Search"]
    assert search[:3] == ["index", "query", "demo"] and "serve" in search
    training = [name for section, name in listed if section == "Models and training"]
    assert {"train", "build-data", "eval", "teachers"} <= set(training)
    first_training = [name for _, name in listed].index(training[0])
    assert all(name in SEARCH for _, name in listed[:first_training])


def test_every_registered_command_is_listed_once():
    import typer.main

    registered = set(typer.main.get_command(app).commands)
    listed = [name for _, name in listed_commands(help_of())]
    assert sorted(listed) == sorted(registered)


def test_usage_lines_name_arguments_in_the_usual_form():
    assert "Usage: instemb-rag query [OPTIONS] TEXT\n" in help_of("query")
    assert "Usage: instemb-rag index [OPTIONS] PATH\n" in help_of("index")
    assert "Usage: instemb-rag teachers install [OPTIONS] NAME\n" in help_of("teachers", "install")
    assert "Usage: instemb-rag eval [OPTIONS] [TASKS]...\n" in help_of("eval")
    assert "{" not in help_of("compare").splitlines()[0]
