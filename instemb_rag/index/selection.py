"""Which files of a folder `index` reads: ignore files, --include / --exclude, data files.

A file under the indexed folder is read when, in this order:

1. no part of its path is hidden (a name starting with "."): .git, .venv, .cache ...;
2. no ignore file leaves it out: every ``.gitignore`` and ``.instembignore`` in the folder, in its
   subfolders, and (when the folder sits in a git checkout) in the folders above it up to the
   checkout's root, each applying to the paths below its own folder, the deepest deciding, as git
   does (``--no-ignore``: none is read); a folder left out is not walked;
3. no --exclude pattern matches it;
4. with --include patterns, one of them matches it; without, it is not a data file (.json,
   .jsonl, .csv): data files are often results, logs or tables whose chunks would outnumber the
   prose many times over (a documents folder measured for issue 69: 11,402 chunks, 400 of them
   prose), so they are read only when a pattern asks for them.

Patterns are .gitignore patterns (``pathspec``), matched against the path relative to the indexed
folder: ``*.json`` anywhere, ``results/`` a folder and all below it, ``/notes/*.md`` anchored.
A file named on the command line (PATH is a file) is read as it is.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from ..choices import STRUCTURED_SUFFIXES

IGNORE_FILES = (".gitignore", ".instembignore")
DATA_SUFFIXES = STRUCTURED_SUFFIXES  # .json, .jsonl, .csv: read only when an --include names them

# Why a file met by the walk is not read (the plan counts them by these).
LEFT_OUT_IGNORED = "ignore files"
LEFT_OUT_EXCLUDED = "--exclude"
LEFT_OUT_NOT_INCLUDED = "no --include matches"
LEFT_OUT_DATA = "data files (--include to read them)"


@dataclass(frozen=True)
class FileSelection:
    """What `index` reads of a folder: the --include / --exclude patterns and whether ignore files count."""

    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    use_ignore_files: bool = True


def _spec(patterns):
    import pathspec

    return pathspec.GitIgnoreSpec.from_lines(list(patterns))


class Patterns:
    """--include or --exclude patterns, each remembering whether it matched anything."""

    def __init__(self, patterns: tuple[str, ...]):
        self.patterns = tuple(patterns)
        self.specs = [_spec([pattern]) for pattern in self.patterns]
        self.matched = [False] * len(self.patterns)

    def __bool__(self) -> bool:
        return bool(self.patterns)

    def match(self, relative: str) -> bool:
        hit = False
        for position, spec in enumerate(self.specs):
            if spec.match_file(relative):
                self.matched[position] = hit = True
        return hit

    def unmatched(self) -> list[str]:
        return [pattern for pattern, matched in zip(self.patterns, self.matched) if not matched]


@dataclass
class IgnoreRules:
    """The ignore files met so far: (folder relative to the indexed root, its patterns), outermost first."""

    root: Path
    rules: list[tuple[str, object]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    read: list[str] = field(default_factory=list)  # the ignore files in use, for the plan

    def add_folder(self, folder: Path, relative: str) -> None:
        """Read the ignore files of ``folder`` (``relative``: its path under the root, "" for the root,
        or "../.." for a folder above it)."""
        for name in IGNORE_FILES:
            path = folder / name
            if not path.is_file():
                continue
            try:
                lines = path.read_text(encoding="utf-8").splitlines()
            except (OSError, UnicodeDecodeError) as error:
                reason = getattr(error, "strerror", None) or error
                self.warnings.append(f"{path} is unreadable ({reason}): the files it would leave out are read")
                continue
            self.rules.append((relative, _spec(lines)))
            self.read.append(str(path))

    def add_parents(self) -> None:
        """The .gitignore files above the root, up to the git checkout's root (none outside a checkout)."""
        above = []
        for parent in self.root.resolve().parents:
            above.append(parent)
            if (parent / ".git").exists():
                break
        else:
            return
        for depth, parent in reversed(list(enumerate(above, start=1))):
            self.add_folder(parent, "/".join([".."] * depth))

    def ignored(self, relative: str, is_folder: bool = False) -> bool:
        """Whether the deepest ignore file with a say leaves ``relative`` out (git's rule)."""
        decided = False
        for base, spec in self.rules:
            inside = _inside(relative, base, self.root)
            if inside is None:
                continue
            result = spec.check_file(inside + "/" if is_folder else inside)
            if result.include is not None:
                decided = bool(result.include)
        return decided


def _inside(relative: str, base: str, root: Path) -> str | None:
    """``relative`` (a path under root) as seen from ``base`` (a folder under or above root), or None
    when it is not below ``base``."""
    if not base:
        return relative
    if base.startswith(".."):
        depth = base.count("..")
        tail = root.resolve().parts[len(root.resolve().parts) - depth :]
        return "/".join([*tail, relative])
    prefix = base + "/"
    return relative[len(prefix) :] if relative.startswith(prefix) else None


class Selector:
    """One walk's decisions: ``left_out(relative)`` says why a file is not read (None: read it)."""

    def __init__(self, root: Path, selection: FileSelection):
        self.selection = selection
        self.include = Patterns(selection.include)
        self.exclude = Patterns(selection.exclude)
        self.ignore = IgnoreRules(root)
        self.counts: Counter[str] = Counter()  # files left out, by reason
        self.folders_left_out = 0
        if selection.use_ignore_files:
            self.ignore.add_parents()

    def enter_folder(self, folder: Path, relative: str) -> None:
        if self.selection.use_ignore_files:
            self.ignore.add_folder(folder, relative)

    def skip_folder(self, relative: str) -> bool:
        """Whether a subfolder is left out whole (an ignore file or an --exclude names the folder)."""
        leave = self.ignore.ignored(relative, is_folder=True) or self.exclude.match(relative + "/")
        self.folders_left_out += leave
        return leave

    def left_out(self, relative: str, suffix: str) -> str | None:
        reason = None
        if self.ignore.ignored(relative):
            reason = LEFT_OUT_IGNORED
        elif self.exclude.match(relative):
            reason = LEFT_OUT_EXCLUDED
        elif self.include and not self.include.match(relative):
            reason = LEFT_OUT_NOT_INCLUDED
        elif not self.include and suffix.lower() in DATA_SUFFIXES:
            reason = LEFT_OUT_DATA
        if reason is not None:
            self.counts[reason] += 1
        return reason

    def notes(self) -> list[str]:
        """What the user should hear about the patterns: each one that matched nothing."""
        notes = [f"--include {pattern!r} matches no file" for pattern in self.include.unmatched()]
        return notes + [f"--exclude {pattern!r} matches no file" for pattern in self.exclude.unmatched()]
