"""The `instemb-rag` command line's typer app, one module per sub-command (every command, and
`query` wherever the lean client (entry.py) hands it over).

    train.py, eval.py (+ eval_facets.py), compare.py, index.py, query.py, serve.py, demo.py, teachers.py
    common.py   the one exit-code table, error reporting and the options several commands share

Each command module exposes ``register(app)`` and imports its heavy parts (torch, faiss) inside
the command, so `instemb-rag --help` lists every command without loading them.

`instemb-rag --help` lists a user's commands first: the search commands (HELP_GROUPS), then the
models and training ones; a command not named in HELP_GROUPS is listed last, in the order its
module registers it.
"""

from __future__ import annotations

import importlib

import typer
from typer.core import TyperArgument, TyperCommand, TyperGroup

__all__ = ["COMMAND_MODULES", "HELP_GROUPS", "app", "register_all"]

# Add a module name here when you add a command module (and its commands to HELP_GROUPS).
COMMAND_MODULES: list[str] = [
    "train",
    "eval",
    "compare",
    "index",
    "query",
    "serve",
    "demo",
    "teachers",
    "compose",
    "daemon",
    "mcp",
    "reader",
]

# The sections of `instemb-rag --help`, in order, each with its commands in the order listed.
HELP_GROUPS: dict[str, tuple[str, ...]] = {
    "Search": ("index", "query", "demo", "serve", "daemon", "mcp"),
    "Models and training": (
        "teachers",
        "compose",
        "export",
        "eval",
        "compare",
        "train",
        "build-data",
        "build-distill-texts",
        "build-facet-groups",
        "build-reader-data",
        "train-reader",
    ),
}
OTHER_COMMANDS = "Other commands"


def help_sections(names: list[str]) -> list[tuple[str, list[str]]]:
    """(section, command names) for `--help`: HELP_GROUPS' order, then any command it does not name."""
    named = {name for group in HELP_GROUPS.values() for name in group}
    sections = [(title, [name for name in group if name in names]) for title, group in HELP_GROUPS.items()]
    sections.append((OTHER_COMMANDS, [name for name in names if name not in named]))
    return [(title, members) for title, members in sections if members]


class GroupedCommands(TyperGroup):
    """The app's group: commands listed by HELP_GROUPS, one help section per group."""

    def list_commands(self, ctx) -> list[str]:
        return [name for _, members in help_sections(list(self.commands)) for name in members]

    def format_commands(self, ctx, formatter) -> None:
        visible = {name: command for name, command in self.commands.items() if not command.hidden}
        if not visible:
            return
        # Room for each short help: the width less the longest name and click's spacing (as typer's).
        limit = formatter.width - 6 - max(len(name) for name in visible)
        for title, members in help_sections(list(visible)):
            with formatter.section(title):
                formatter.write_dl([(name, visible[name].get_short_help_str(limit)) for name in members])


def usual_usage_piece(argument: TyperArgument) -> str:
    """An argument as a usage line usually names it: ``TEXT``, ``[PATH]``, ``FILES...`` (typer
    0.29 writes ``{text}``, which reads like a placeholder to fill in with braces)."""
    name = (argument.metavar or argument.name or "").upper()
    name = name if argument.required else f"[{name}]"
    return name + ("..." if argument.nargs != 1 else "")


class UsualUsage:
    """Mixed into every command's class: the usage line in the usual form, and the options of a
    help panel (``rich_help_panel``, e.g. "Qdrant server") in a section of their own after the
    command's common options (the plain help ignores panels otherwise: rich_markup_mode=None)."""

    def format_options(self, ctx, formatter) -> None:
        sections: dict[str, list] = {"Arguments": [], "Options": []}
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is not None:
                common = "Arguments" if param.param_type_name == "argument" else "Options"
                sections.setdefault(getattr(param, "rich_help_panel", None) or common, []).append(record)
        for title, records in sections.items():
            if records:
                with formatter.section(title):
                    formatter.write_dl(records)

    def collect_usage_pieces(self, ctx) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if isinstance(param, TyperArgument):
                pieces.append(usual_usage_piece(param))
            else:
                pieces.extend(param.get_usage_pieces(ctx))
        return pieces


def with_usual_usage(command_class: type[TyperCommand] | None) -> type[TyperCommand]:
    base = command_class or TyperCommand
    if issubclass(base, UsualUsage):
        return base
    return type(base.__name__, (UsualUsage, base), {"__doc__": base.__doc__})


def use_usual_usage(typer_app: typer.Typer) -> None:
    """Every registered command's class, and those of sub-apps (``teachers``), with UsualUsage."""
    for info in typer_app.registered_commands:
        info.cls = with_usual_usage(info.cls)
    for group in typer_app.registered_groups:
        if group.typer_instance is not None:
            use_usual_usage(group.typer_instance)


app = typer.Typer(
    name="instemb-rag",
    cls=GroupedCommands,
    help="Instruction-following retrieval: index documents once, query with an instruction.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
    # click's plain help, not typer's rich panels: rich squeezes the option-name column at 80 columns,
    # the width of every pipe, CI log and editor panel, and cuts names (`--qdrant-collect…`); click
    # puts a long name on its own line and wraps only the help text. Help texts are read verbatim
    # (no rich markup), so a `[...]` in one is printed, not swallowed.
    rich_markup_mode=None,
)


def show_notices_as_notes() -> None:
    """A library warning whose category names a ``cli_label`` (the sentence encoder's shortened
    instruction, modules/sentence_encoder.py: "note") prints as the command line's other notes do, ``note: ...``
    on stderr, not as Python's ``file.py:332: Category: ...`` with a source line. Other warnings
    print as Python prints them."""
    import warnings

    if getattr(warnings.showwarning, "shows_notes", False):
        return
    python_shows = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):
        label = getattr(category, "cli_label", None)
        if label is None:
            return python_shows(message, category, filename, lineno, file, line)
        from rich.console import Console

        from .common import say

        say(Console(stderr=True), label, message)

    show.shows_notes = True
    warnings.showwarning = show


@app.callback()
def before_every_command() -> None:
    show_notices_as_notes()


def register_all(app) -> None:
    for name in COMMAND_MODULES:
        importlib.import_module(f"{__package__}.{name}").register(app)
    use_usual_usage(app)


register_all(app)
