"""The `instemb-rag` console script (and `python -m instemb_rag.cli`): a warm query answered by the
resident query process without importing typer, pydantic or rich; every other command line handed
to the typer app (typer_app.py), in this process.

    instemb-rag query "light tent" -i "focus on packed weight" --json    # the lean client, when warm

The lean client takes `query` when it understands the whole command line and the resident process
runs: it parses the arguments by query_flags.py (the typer command's options as data, generated
from it), builds the request and prints the answer with the command's own code (query_core.py:
the same request, the same JSON bytes, the same table, with rich imported for a table or a note
only), and prints the process's refusal of a query (a missing index, a knob the model lacks) as
the command's ``error: ...`` with its exit code. Anything else is handed over, so that the typer
app answers it exactly as it does without this module: `--help`, a missing argument, an option or
value it does not read (or out of range: typer's message), an option only the in-process path
honours (--no-daemon, --precision, --compile, a store setting; or its environment variable set),
no resident process running (the typer command starts it), or the process failing to answer.

``INSTEMB_FULL_CLI=1`` skips the lean client (the tests compare the two paths with it).

Standard library only at import: what a warm query costs here is Python's start, the project's
light modules (the request, the resident client) and the answer printed.
"""

from __future__ import annotations

import os
import re
import sys
from typing import Any

from .notes import error_line

__all__ = ["FULL_CLI_ENV", "lean_query", "main", "parse_query"]

FULL_CLI_ENV = "INSTEMB_FULL_CLI"  # 1: every command line goes to the typer app
# The values the lean parser reads (anything else: the typer command's checks and messages).
INTEGER = re.compile(r"[0-9]+")
DECIMAL = re.compile(r"[0-9]+(\.[0-9]+)?")


def main(argv: list[str] | None = None) -> Any:
    """The console script: ``argv`` (default: the process's arguments) answered and the exit code
    returned, or handed to the typer app (which exits itself)."""
    args = sys.argv[1:] if argv is None else list(argv)
    if args[:1] == ["query"] and os.environ.get(FULL_CLI_ENV, "").strip() in ("", "0"):
        code = lean_query(args[1:])
        if code is not None:
            return code
    from .typer_app import app

    return app(args=argv)


def lean_query(args: list[str]) -> int | None:
    """`query ARGS` answered by the resident process: the exit code, or None where the typer app
    is to answer it (nothing printed then)."""
    from . import query_flags

    values = parse_query(args, query_flags.ARGUMENT, query_flags.OPTIONS)
    if values is None:
        return None
    try:
        return ask_and_print(values)
    except KeyboardInterrupt:  # as the typer app leaves on Ctrl-C
        return 130
    except BrokenPipeError:  # the reader went away (`| head`): quiet, as the typer app is
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1


def ask_and_print(values: dict[str, Any]) -> int | None:
    from ..resident.ask import answer_from_document, resident_request
    from ..resident.client import ResidentAnswerError, ResidentClient
    from .query_core import request_of_options, show_answer

    as_json = values.pop("as_json")
    try:
        request = request_of_options(**values)
        reply = ResidentClient().search(resident_request(request), start=False)
    except ResidentAnswerError as error:  # the query refused (a missing index...): cli/common.py's fail
        sys.stderr.write(error_line(str(error), sys.stderr.isatty()) + "\n")
        sys.stderr.flush()
        return error.exit_code
    except Exception:  # no process runs or it failed, a bad --filter or knob, anything
        return None  # else: the typer app's to answer and to say, as it does without this module
    show_answer(answer_from_document(request, reply), values["hybrid"], values["explain"], as_json)
    return 0


def parse_query(args: list[str], argument: str, options: dict[str, dict]) -> dict[str, Any] | None:
    """The values of the options a warm query answers by, named as the command's parameters
    (defaults filled in, the argument under ``argument``), read as the typer command reads
    ``args``; None where the typer app is to read them instead (see the module's docstring)."""
    by_flag = {flag: (name, True) for name, spec in options.items() for flag in spec["flags"]}
    by_flag.update({flag: (name, False) for name, spec in options.items() for flag in spec["off"]})
    given: dict[str, Any] = {}
    positional: list[str] = []
    at = 0
    while at < len(args):
        arg, at = args[at], at + 1
        if arg == "--" or arg == "-":
            return None
        if not arg.startswith("-"):
            positional.append(arg)
            continue
        if arg.startswith("--"):
            flag, equals, attached = arg.partition("=")
            explicit = attached if equals else None
        else:  # a short option; its value may follow it at once (-k3)
            flag, explicit = arg[:2], (arg[2:] or None)
        found = by_flag.get(flag)
        if found is None:
            return None
        name, on = found
        spec = options[name]
        if spec["takes"] == "flag":
            if explicit is not None:
                return None
            given[name] = on
            continue
        if explicit is not None:
            raw = explicit
        elif spec["bare"] is not None and (at == len(args) or args[at] not in spec["choices"]):
            raw = spec["bare"]  # `--hybrid` without a rule (query.py's HybridOptionalValueCommand)
        elif at < len(args):
            raw, at = args[at], at + 1
        else:
            return None
        value = read_value(raw, spec)
        if value is None:
            return None
        if spec["multiple"]:
            given.setdefault(name, []).append(value)
        else:
            given[name] = value
    if len(positional) != 1:
        return None
    for name, spec in options.items():
        if name in given and (not spec["answers"] or spec["checked"]):
            return None
        if spec["envvar"] and os.environ.get(spec["envvar"]):
            return None
    values = {name: spec["default"] for name, spec in options.items() if spec["answers"]}
    values.update(given)
    values[argument] = positional[0]
    return values


def read_value(raw: str, spec: dict) -> Any:
    """``raw`` as the option's value where it is one the command takes as it stands, else None."""
    if raw.startswith("-"):
        return None
    takes = spec["takes"]
    if takes == "str":
        return raw
    if takes == "choice":
        return raw if raw in spec["choices"] else None
    if takes == "path":
        return raw or None
    if takes == "int" and INTEGER.fullmatch(raw):
        value: float = int(raw)
    elif takes == "float" and DECIMAL.fullmatch(raw):
        value = float(raw)
    else:
        return None
    low, high = spec["low"], spec["high"]
    if (low is not None and value < low) or (high is not None and value > high):
        return None
    return value
