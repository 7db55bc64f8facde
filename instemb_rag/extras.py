"""Optional dependencies, imported where they are used: a missing one is an error that names the
extra to install, never an ImportError traceback or a silent skip."""

from __future__ import annotations

import importlib
from types import ModuleType

from .errors import InstEmbError

__all__ = ["MissingExtraError", "require"]


class MissingExtraError(InstEmbError):
    pass


def require(module: str, extra: str, purpose: str, package: str = "instemb-rag") -> ModuleType:
    """``module`` imported, or an error saying that ``purpose`` needs the ``extra`` of ``package``
    (the LlamaIndex integration names its own)."""
    try:
        return importlib.import_module(module)
    except ImportError:
        checkout = " (in a checkout: bash scripts/setup.sh --dev)" if package == "instemb-rag" else ""
        raise MissingExtraError(
            f"{purpose} needs {module}, from the {extra} extra: pip install '{package}[{extra}]'{checkout}."
        ) from None
