"""Part and route types as importable class paths (the way sentence-transformers' ``modules.json``
records each module's ``type``): ``instemb_parts.json`` names each part's class and each route's
class, and loading imports it. A new part or route is then a class in its own file, recorded by
its path, with no table to add it to.

A model folder may come from anywhere, so only classes under the ``instemb_rag.`` package are
imported: any other path is refused before anything is imported, with the path and what to do.
"""

from __future__ import annotations

import re

from ...errors import CheckpointError

__all__ = ["PACKAGE", "class_path", "resolve_class"]

PACKAGE = "instemb_rag"
# Dotted Python identifiers: no relative import, no attribute access beyond the class itself.
DOTTED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+")


def class_path(cls: type) -> str:
    """The path a class is recorded by (``module.QualifiedName``)."""
    return f"{cls.__module__}.{cls.__qualname__}"


def resolve_class(path: object, where: str, what: str) -> type:
    """The class ``path`` names, imported only from instemb-rag's own package; ``where`` (the file)
    and ``what`` ("query route", "part 'gate'") name it in messages."""
    if not isinstance(path, str) or not DOTTED.fullmatch(path):
        raise CheckpointError(
            f"{where}: the {what} type {path!r} is not a class path (module.Class). The folder is damaged: "
            "copy the whole model folder again."
        )
    if not path.startswith(PACKAGE + "."):
        raise CheckpointError(
            f"{where}: the {what} type {path!r} is not a class of instemb-rag, and instemb-rag imports no "
            f"other code a model folder names (a folder may come from anywhere). Use a folder saved by "
            f"instemb-rag; a part or route of your own belongs in the {PACKAGE} package, recorded by its "
            "class path (docs/ARCHITECTURE.md: adding an arrangement)."
        )
    from importlib import import_module

    module_name, _, class_name = path.rpartition(".")
    try:
        found = getattr(import_module(module_name), class_name)
    except (ImportError, AttributeError) as error:
        raise CheckpointError(
            f"{where}: the {what} type {path!r} names no class of this instemb-rag ({error}). The folder "
            "was saved by another version: upgrade instemb-rag (pip install -U instemb-rag), or load it "
            "with the version that saved it."
        ) from None
    if not isinstance(found, type):
        raise CheckpointError(f"{where}: the {what} type {path!r} is not a class. The folder is damaged.")
    return found
