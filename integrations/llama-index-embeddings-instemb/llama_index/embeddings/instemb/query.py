"""A QueryBundle that also says which instruction the query is to be read under."""

from __future__ import annotations

from dataclasses import dataclass

from llama_index.core.schema import QueryBundle


@dataclass
class InstructionQueryBundle(QueryBundle):
    """QueryBundle + ``instruction``.

    LlamaIndex's vector retrievers embed ``query_str`` alone unless ``embedding`` is set, so
    a bundle meant for them should carry its embedding (see ``InstEmbEmbedding.query_bundle``).
    ``InstEmbRetriever`` accepts a bundle without an embedding and embeds it under
    ``instruction`` itself.
    """

    instruction: str | None = None
