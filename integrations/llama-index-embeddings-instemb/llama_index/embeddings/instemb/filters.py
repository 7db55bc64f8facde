"""LlamaIndex MetadataFilters for an ``instemb-rag index`` folder.

The index's stores filter on a chunk's ``source`` (its file) only: FAISS through an id
selector, Qdrant through a keyword match, both given the list of sources allowed. So a
MetadataFilters becomes that list: ``source`` with ``==`` or ``in``, combined with AND / OR
(nested too). Any other key or operator is refused with a message saying what is supported,
rather than ignored.
"""

from __future__ import annotations

import re

from llama_index.core.vector_stores.types import FilterCondition, FilterOperator, MetadataFilter, MetadataFilters

from instemb_rag.errors import InstEmbError

FILTER_KEY = "source"
SUPPORTED = "key 'source' with operator == (EQ) or in (IN), combined with AND or OR"


def allowed_sources(filters: MetadataFilters) -> set[str] | None:
    """The sources a chunk's file must be one of (None: any)."""
    parts = [
        allowed_sources(part) if isinstance(part, MetadataFilters) else _one_filter(part) for part in filters.filters
    ]
    parts = [part for part in parts if part is not None]
    if not parts:
        return None
    if filters.condition in (None, FilterCondition.AND):
        return set.intersection(*parts)
    if filters.condition == FilterCondition.OR:
        return set.union(*parts)
    raise InstEmbError(
        f"An instemb-rag index folder cannot filter with condition {filters.condition.value!r}; it supports {SUPPORTED}."
    )


def as_index_filter(sources: set[str]) -> dict[str, list[str]]:
    """``Index.search``'s filter for exactly these sources (its values are globs: escape them)."""
    return {FILTER_KEY: [_literal_glob(source) for source in sorted(sources)]}


def _one_filter(item: MetadataFilter) -> set[str]:
    if item.key != FILTER_KEY:
        raise InstEmbError(
            f"An instemb-rag index folder cannot filter on metadata key {item.key!r}: its stores hold "
            f"each chunk's source file only. Supported: {SUPPORTED}."
        )
    if item.operator == FilterOperator.EQ and isinstance(item.value, str):
        return {item.value}
    if item.operator == FilterOperator.IN and isinstance(item.value, list):
        return {str(value) for value in item.value}
    raise InstEmbError(
        f"An instemb-rag index folder cannot filter 'source' with operator {item.operator.value!r} "
        f"and value {item.value!r}. Supported: {SUPPORTED} (a string for ==, a list for in)."
    )


def _literal_glob(name: str) -> str:
    return re.sub(r"([*?\[])", r"[\1]", name)
