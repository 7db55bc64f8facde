"""Every public name stays: the package faces' ``__all__``, the public methods and fields of the
classes they hand out, the LlamaIndex integration's, the command line's commands and options, and
the server's request fields. A refactor may add names; losing one fails here (issue 62: "every
public name unchanged").

The record is tests/data/public_names.json. A name added on purpose is recorded with
``INSTEMB_RECORD_PUBLIC_NAMES=1 pytest tests/test_public_names.py`` (the test then rewrites the
record and still fails, so that the change is committed on purpose, never by a green run).
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
from pathlib import Path

import pytest

RECORD = Path(__file__).parent / "data" / "public_names.json"

# The faces a user imports from; each module's __all__ is public, and so is each public member of the
# classes it exports.
FACES = [
    "instemb_rag",
    "instemb_rag.encoder",
    "instemb_rag.index",
    "instemb_rag.index.stores",
    "instemb_rag.serve",
    "instemb_rag.interop",
    "instemb_rag.eval",
    "instemb_rag.losses",
    "instemb_rag.teachers",
    "llama_index.embeddings.instemb",
]


def class_members(cls: type) -> list[str]:
    """Its public attributes and methods (pydantic fields included), with each method's parameters."""
    names = []
    fields = getattr(cls, "model_fields", None) or {}
    for name in sorted(set(dir(cls)) | set(fields)):
        if name.startswith("_") or name.startswith("model_"):
            continue
        member = inspect.getattr_static(cls, name, None)
        function = getattr(member, "__func__", member)
        if inspect.isfunction(function):
            parameters = [p for p in inspect.signature(function).parameters if p not in ("self", "cls")]
            names.append(f"{name}({', '.join(parameters)})")
        else:
            names.append(name)
    return names


def face_names(module_name: str) -> dict[str, list[str]]:
    module = importlib.import_module(module_name)
    names = {}
    for name in getattr(module, "__all__", []):
        value = getattr(module, name)
        if inspect.isclass(value) and value.__module__.split(".")[0] in ("instemb_rag", "llama_index"):
            names[name] = class_members(value)
        else:
            names[name] = []
    return names


def command_line() -> dict[str, list[str]]:
    import click
    import typer

    from instemb_rag.cli import app

    found: dict[str, list[str]] = {}

    def walk(command: click.Command, path: str) -> None:
        found[path] = sorted(opt for param in command.params for opt in getattr(param, "opts", [param.name]))
        for name, child in getattr(command, "commands", {}).items():
            walk(child, f"{path} {name}")

    walk(typer.main.get_command(app), "instemb-rag")
    return found


def server_fields() -> dict[str, list[str]]:
    from instemb_rag.serve import schemas

    return {
        name: sorted(model.model_fields)
        for name, model in vars(schemas).items()
        if inspect.isclass(model) and hasattr(model, "model_fields") and model.__module__ == schemas.__name__
    }


def public_names() -> dict:
    return {
        "faces": {face: face_names(face) for face in FACES},
        "command_line": command_line(),
        "server": server_fields(),
    }


def lost(recorded, now, where: str = "") -> list[str]:
    """What the record has and ``now`` lacks (a name, a field, a command or an option)."""
    if isinstance(recorded, dict):
        missing = []
        for key, value in recorded.items():
            if key not in now:
                missing.append(f"{where}{key}")
            else:
                missing += lost(value, now[key], f"{where}{key} > ")
        return missing
    return [f"{where}{item}" for item in recorded if item not in now]


def test_no_public_name_is_lost():
    pytest.importorskip("llama_index.embeddings.instemb")
    now = public_names()
    if os.environ.get("INSTEMB_RECORD_PUBLIC_NAMES") == "1":
        RECORD.write_text(json.dumps(now, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        pytest.fail(f"recorded {RECORD}: commit it on purpose, then run again without INSTEMB_RECORD_PUBLIC_NAMES")
    recorded = json.loads(RECORD.read_text(encoding="utf-8"))
    assert lost(recorded, now) == []


def test_the_comparison_sees_a_lost_name():
    recorded = {"faces": {"pkg": {"Thing": ["search(query, knobs)", "name"]}}, "command_line": {"x": ["--a"]}}
    now = {"faces": {"pkg": {"Thing": ["search(query)", "name", "extra"]}}, "command_line": {"x": ["--a", "--b"]}}
    assert lost(recorded, now) == ["faces > pkg > Thing > search(query, knobs)"]
