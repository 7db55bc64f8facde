"""What `index` reads of a folder (issue 69): --include / --exclude, .gitignore and .instembignore,
--no-ignore, hidden paths, data files left out unless included, and the bad inputs around them."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from typer.testing import CliRunner

from instemb_rag.cli import app
from instemb_rag.index.catalog import Catalog
from instemb_rag.index.documents import discover
from instemb_rag.index.selection import LEFT_OUT_DATA, LEFT_OUT_IGNORED, FileSelection

runner = CliRunner()
MB = 1024 * 1024


def write(root: Path, files: dict[str, str | bytes]) -> Path:
    for relative, content in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return root


FOLDER = {
    "guide.md": "the tent is durable nylon . good in rain .",
    "notes/stove.txt": "the stove is light . packed size 10 cm .",
    "notes/drafts/old.md": "an old draft about the pole .",
    "results/run1.json": json.dumps({"ndcg": 0.5, "recall": [0.1, 0.2]}),
    "results/reviews.jsonl": json.dumps({"review": "a warm tent"}) + "\n",
    "table.csv": "name,weight\nridge tent,2\n",
    ".cache/hidden.md": "hidden words",
    "notes/.secret.md": "hidden file",
    "build.log.md": "a log page",
}


def read_files(root: Path, selection: FileSelection = FileSelection()):
    found = discover(root, 20 * MB, selection)
    return sorted(found.files), found


def test_data_files_are_left_out_unless_a_pattern_includes_them(tmp_path):
    root = write(tmp_path / "docs", FOLDER)
    files, found = read_files(root)
    assert files == ["build.log.md", "guide.md", "notes/drafts/old.md", "notes/stove.txt"]  # no hidden path
    assert found.left_out == {LEFT_OUT_DATA: 3}
    files, found = read_files(root, FileSelection(include=("*.json", "*.md")))
    assert files == ["build.log.md", "guide.md", "notes/drafts/old.md", "results/run1.json"]
    assert found.notes == []


def test_exclude_wins_and_patterns_that_match_nothing_are_said(tmp_path):
    root = write(tmp_path / "docs", FOLDER)
    files, found = read_files(root, FileSelection(include=("notes/", "*.csv"), exclude=("drafts/", "*.pdf")))
    assert files == ["notes/stove.txt", "table.csv"]
    assert found.folders_left_out == 1  # drafts/ is not walked
    assert found.notes == ["--exclude '*.pdf' matches no file"]
    _, found = read_files(root, FileSelection(include=("*.xyz",)))
    assert found.files == {} and found.notes == ["--include '*.xyz' matches no file"]


def test_ignore_files_in_the_folder_and_below_decide_as_git_does(tmp_path):
    root = write(tmp_path / "docs", FOLDER)
    write(root, {".gitignore": "*.log.md\nnotes/drafts/\n", "notes/.instembignore": "*.txt\n"})
    files, found = read_files(root)
    assert files == ["guide.md"]
    assert found.left_out == {LEFT_OUT_DATA: 3, LEFT_OUT_IGNORED: 2} and found.folders_left_out == 1
    # a deeper ignore file takes back what a shallower one left out
    write(root, {"notes/.gitignore": "!drafts/\n"})
    (root / ".gitignore").write_text("*.log.md\ndrafts/*.md\n")
    (root / "notes" / ".gitignore").write_text("!drafts/old.md\n")
    files, _ = read_files(root)
    assert files == ["guide.md", "notes/drafts/old.md"]
    files, found = read_files(root, FileSelection(use_ignore_files=False))
    assert files == ["build.log.md", "guide.md", "notes/drafts/old.md", "notes/stove.txt"]
    assert found.ignore_files == []


def test_the_gitignore_of_the_checkout_above_counts(tmp_path):
    checkout = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(checkout)], check=True)
    write(checkout, {".gitignore": "docs/results/\n*.log.md\n"})
    root = write(checkout / "docs", FOLDER)
    files, found = read_files(root, FileSelection(include=("*",)))
    assert files == ["guide.md", "notes/drafts/old.md", "notes/stove.txt", "table.csv"]
    assert str(checkout / ".gitignore") in found.ignore_files


def test_an_unreadable_gitignore_is_a_warning_and_every_file_is_read(tmp_path):
    root = write(tmp_path / "docs", FOLDER)
    write(root, {".gitignore": b"*.md\n\xff\xfe not utf-8\n"})
    files, found = read_files(root)
    assert files == ["build.log.md", "guide.md", "notes/drafts/old.md", "notes/stove.txt"]
    assert len(found.warnings) == 1 and ".gitignore is unreadable" in found.warnings[0]
    assert "the files it would leave out are read" in found.warnings[0]


def cli(*args: str):
    result = runner.invoke(app, list(args), env={"COLUMNS": "200"})
    return result.exit_code, " ".join(result.output.split())


def sources(index_dir: Path) -> list[str]:
    catalog = Catalog.open(index_dir)
    try:
        return catalog.sources()
    finally:
        catalog.close()


def test_a_pattern_matching_nothing_embeds_nothing_and_keeps_the_index(tiny_model_dir, tmp_path):
    root = write(tmp_path / "docs", FOLDER)
    index_dir = tmp_path / "index"
    model = ["--index-dir", str(index_dir), "--model", str(tiny_model_dir), "--device", "cpu", "--no-progress"]
    code, output = cli("index", str(root), *model)
    assert code == 0, output
    before = sources(index_dir)
    assert before == ["build.log.md", "guide.md", "notes/drafts/old.md", "notes/stove.txt"]
    code, output = cli("index", str(root), *model, "--include", "*.rst")
    assert code == 0, output
    assert "--include '*.rst' matches no file" in output and "Nothing was embedded" in output
    assert sources(index_dir) == before
    # a narrower selection: the index follows it (the files left out are removed)
    code, output = cli("index", str(root), *model, "--include", "*.md", "--exclude", "drafts/")
    assert code == 0, output
    assert sources(index_dir) == ["build.log.md", "guide.md"]


def test_a_data_file_without_text_is_skipped_with_its_reason_and_counted(tiny_model_dir, tmp_path):
    root = write(tmp_path / "docs", FOLDER)
    write(root, {"results/empty.csv": "a,b\n1,2\n3,4\n"})
    index_dir = tmp_path / "index"
    code, output = cli(
        "index", str(root), "--index-dir", str(index_dir), "--model", str(tiny_model_dir), "--device", "cpu",
        "--no-progress", "--include", "results/", "--include", "table.csv",
    )  # fmt: skip
    assert code == 0, output
    assert sources(index_dir) == ["results/reviews.jsonl", "table.csv"]
    assert "results/run1.json: data file without text: it parses as JSON but holds only numbers" in output
    assert "results/empty.csv: data file without text" in output
    assert "data files without text │ 2" in output


def test_help_says_what_is_read_and_puts_the_qdrant_options_last():
    result = runner.invoke(app, ["index", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    text = result.output
    flat = " ".join(text.split())
    assert "Data files (.json, .jsonl, .csv) are left out unless an --include pattern matches them" in flat
    for option in ("--include", "--exclude", "--no-ignore", "--dry-run"):
        assert option in text
    panel = text.index("Qdrant server")
    assert text.index("--chunk-size") < panel < text.index("--qdrant-url")
    assert all(text.index(f"--qdrant-{name}") > panel for name in ("api-key", "collection", "shards", "on-disk"))
