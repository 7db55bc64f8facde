"""Thin typer entry points. Each module exposes ``register(app)``."""

from __future__ import annotations

import importlib

# Add a module name here when you add a command module.
COMMAND_MODULES: list[str] = ["train", "eval", "index", "query", "serve", "demo", "teachers"]


def register_all(app) -> None:
    for name in COMMAND_MODULES:
        importlib.import_module(f"{__name__}.{name}").register(app)
