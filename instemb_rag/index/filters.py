"""Metadata filters of a search (``--filter KEY=VALUE``): which keys there are and how an
expression is read. Light, so the CLI checks a filter before it asks the resident query process."""

from __future__ import annotations

from .errors import BadInputError

__all__ = ["FILTER_KEYS", "parse_filters"]

FILTER_KEYS = ("source",)


def parse_filters(expressions: list[str] | None) -> dict[str, str]:
    """'source=tents/*.md' -> {'source': 'tents/*.md'}; several expressions must all hold."""
    parsed: dict[str, str] = {}
    for expression in expressions or []:
        key, sign, value = expression.partition("=")
        key, value = key.strip(), value.strip()
        if not sign or not value:
            raise BadInputError(f"--filter '{expression}' is not KEY=VALUE; e.g. --filter source=tents/ridgeline.md")
        if key not in FILTER_KEYS:
            raise BadInputError(f"--filter key '{key}' is unknown; filterable keys: {', '.join(FILTER_KEYS)}")
        parsed[key] = value
    return parsed
