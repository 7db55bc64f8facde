"""Writes query_flags.py: `instemb-rag query`'s options as data for the lean client (entry.py),
read from the typer command itself, so the command's signature stays the one definition of them.

    python -m instemb_rag.cli.query_flags_source      # after changing an option of `query`

tests/test_query_flags.py fails while the written table differs from what this reads. Each
option records what the lean client needs to parse it as the command does, or to see that it
cannot: its flags (and a switch's off flags), what value it takes (a flag, str, int, float, path,
one of its choices; ``other``: the lean client hands the command line over), its range and default,
its environment variable, whether a callback checks it (given, it is handed over), the value of a
bare occurrence (``--hybrid``), and whether a warm query answers by it (``answers``: a parameter of
query_core's request, or of how the answer is printed; any other one given is handed over).
"""

from __future__ import annotations

import inspect
import json
from enum import Enum
from pathlib import Path
from typing import Any

__all__ = ["flags_table", "table_source", "write"]

TABLE = Path(__file__).with_name("query_flags.py")
HEADER = '''"""`instemb-rag query`'s options as data, for the lean client (entry.py). Generated from the typer
command by query_flags_source.py; do not edit: `python -m instemb_rag.cli.query_flags_source`
writes it again (tests/test_query_flags.py fails while it is stale)."""

# The command's one argument (required).
'''


def query_command():
    """The `query` command as typer builds it (the class that parses it included)."""
    import typer.main

    from .typer_app import app

    return typer.main.get_command(app).commands["query"]


def flags_table() -> dict[str, Any]:
    """{"argument": name, "options": {name: spec}} of the query command, in its parameters' order."""
    from .query_core import SHOWN_ONLY, request_of_options

    command = query_command()
    answers = set(inspect.signature(request_of_options).parameters) | set(SHOWN_ONLY)
    arguments = [param for param in command.params if param.param_type_name == "argument"]
    if len(arguments) != 1 or not arguments[0].required or arguments[0].nargs != 1:
        raise SystemExit(
            "query takes other arguments than one required TEXT now: teach entry.py's parser to read them."
        )
    optional = getattr(command, "optional_value", None)  # query.py's HybridOptionalValueCommand: --hybrid
    options = {}
    for param in command.params:
        if param.param_type_name != "option":
            continue
        takes, low, high, choices = value_kind(param)
        options[param.name] = {
            "flags": tuple(param.opts),
            "off": tuple(param.secondary_opts),
            "takes": takes,
            "choices": choices,
            "low": low,
            "high": high,
            "multiple": bool(param.multiple),
            "default": plain(param.default),
            "envvar": param.envvar,
            "checked": param.callback is not None,
            "bare": command.bare_value() if optional in param.opts else None,
            "answers": param.name in answers,
        }
    return {"argument": arguments[0].name, "options": options}


def value_kind(param) -> tuple[str, float | None, float | None, tuple[str, ...] | None]:
    """(what the option takes, its least and largest value, its choices) as the lean parser reads
    them; "other" where it could not check a value as the command does."""
    if getattr(param, "count", False):
        return "other", None, None, None
    if getattr(param, "is_flag", False):
        return ("flag" if getattr(param, "is_bool_flag", False) else "other"), None, None, None
    if getattr(param, "nargs", 1) != 1:
        return "other", None, None, None
    descriptor = getattr(param, "type_descriptor", None)
    if descriptor is not None:  # typer >= 0.29: its own parser, values checked by pydantic
        info = descriptor.parameter_info
        if descriptor.is_choice:
            case = descriptor.case_sensitive
            return ("choice" if case else "other"), None, None, tuple(plain(choice) for choice in descriptor.choices)
        annotation = descriptor.annotation
        if descriptor.is_list:
            (annotation,) = descriptor.annotation.__args__
        clamp = getattr(info, "clamp", False)
        kind = {str: "str", int: "int", float: "float", Path: "path"}.get(annotation, "other")
        return ("other" if clamp else kind), param.min, param.max, None
    import click  # typer < 0.29: click's types

    kind = param.type
    if isinstance(kind, click.Choice):
        return ("choice" if kind.case_sensitive else "other"), None, None, tuple(plain(c) for c in kind.choices)
    if isinstance(kind, (click.IntRange, click.FloatRange)):
        if kind.clamp or kind.min_open or kind.max_open:
            return "other", None, None, None
        return ("int" if isinstance(kind, click.IntRange) else "float"), kind.min, kind.max, None
    found = {click.STRING: "str", click.INT: "int", click.FLOAT: "float"}.get(kind)
    if found is None and isinstance(kind, click.Path):
        found = "path"
    return found or "other", None, None, None


def plain(value: Any) -> Any:
    """A default or choice as the table writes it (a path as its text, an enum as its value)."""
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, (list, tuple)):
        return tuple(plain(item) for item in value) or None
    return value


def literal(value: Any) -> str:
    """Python source of a plain value, in the project's style (double quotes)."""
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, tuple):
        items = ", ".join(literal(item) for item in value)
        return f"({items},)" if len(value) == 1 else f"({items})"
    return repr(value)


def table_source(table: dict[str, Any] | None = None) -> str:
    """query_flags.py's text."""
    table = table or flags_table()
    lines = [
        HEADER + f"ARGUMENT = {literal(table['argument'])}",
        "",
        "# Each option of the command, by its parameter's name.",
        "OPTIONS = {",
    ]
    for name, spec in table["options"].items():
        lines.append(f"    {literal(name)}: {{")
        lines += [f"        {literal(key)}: {literal(value)}," for key, value in spec.items()]
        lines.append("    },")
    lines.append("}")
    return "\n".join(lines) + "\n"


def write() -> Path:
    TABLE.write_text(table_source(), encoding="utf-8")
    return TABLE


if __name__ == "__main__":
    print(f"wrote {write()}")
