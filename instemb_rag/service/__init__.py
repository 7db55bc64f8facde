"""The query service: one request (request.py ``QueryRequest``, the one declaration of a search's
fields) answered over an open index (answer.py ``search``), the same way for every entry point:
the command line, the resident query process, ``serve``, MCP, ``Index.search`` and the LlamaIndex
retriever. Light: no numpy or torch (the index and the encoder are handed in)."""

from .answer import Answer, KnobRefusedError, explain_hits, finish, require_knobs, search
from .request import DECLARED_HERE, QueryRequest, declared, declared_fields, declared_parameters

__all__ = [
    "DECLARED_HERE",
    "Answer",
    "KnobRefusedError",
    "QueryRequest",
    "declared",
    "declared_fields",
    "declared_parameters",
    "explain_hits",
    "finish",
    "require_knobs",
    "search",
]
