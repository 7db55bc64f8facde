"""`--help` of every command, rendered where stdout is no terminal (a pipe, a CI log, an editor's
panel: 80 columns, or fewer), names every option whole (issue 55): never `--qdrant-collect…`."""

from __future__ import annotations

import re

import pytest
import typer.main
from typer.testing import CliRunner

from instemb_rag.cli import app

runner = CliRunner()


def command_paths(command, path: tuple[str, ...] = ()):
    """(path, command) of every command and group under the app (typer's own click classes)."""
    yield path, command
    for name, sub in (getattr(command, "commands", None) or {}).items():
        yield from command_paths(sub, (*path, name))


COMMANDS = list(command_paths(typer.main.get_command(app)))


@pytest.mark.parametrize("columns", ["80", "50"])
@pytest.mark.parametrize("path, command", COMMANDS, ids=[" ".join(path) or "app" for path, _ in COMMANDS])
def test_help_names_every_option_whole_at_a_narrow_width(path, command, columns):
    result = runner.invoke(app, [*path, "--help"], env={"COLUMNS": columns})
    assert result.exit_code == 0, result.output
    names = [name for param in command.params for name in (*param.opts, *param.secondary_opts)]
    names = [name for name in names if name.startswith("-")]
    cut = [name for name in names if not re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", result.output)]
    assert not cut, f"{cut} not whole in:\n{result.output}"
    assert "…" not in result.output, result.output


def test_chunk_size_help_reads_as_a_sentence():
    """Its default was once written `[default: ...]`, which rich took for markup and dropped,
    leaving "Chunk length in tokens of what embeds documents ."."""
    result = runner.invoke(app, ["index", "--help"], env={"COLUMNS": "200"})
    flat = " ".join(result.output.split())
    assert "Chunk length, in tokens of the model's document side. Default: 256, or that side's token limit" in flat
    assert not re.search(r"\w \.(\s|$)", flat), flat


def test_help_and_skip_message_name_one_list_of_file_types(tmp_path):
    """`index --help` and the skip message of an unsupported file read one list (choices.py)."""
    from instemb_rag.choices import SUPPORTED_SUFFIXES
    from instemb_rag.index.documents import discover

    (tmp_path / "photo.jpg").write_bytes(b"\xff\xd8\xff")
    [skipped] = discover(tmp_path, 1 << 20).skipped
    listed = re.search(r"\(supported: ([^)]*)\)", skipped.reason).group(1)
    assert set(listed.split(", ")) == SUPPORTED_SUFFIXES, listed
    result = runner.invoke(app, ["index", "--help"], env={"COLUMNS": "200"})
    assert f"Folder (or file) of documents: {listed}." in " ".join(result.output.split()), result.output
