"""The node parser ``InstEmbEmbedding.node_parser()`` builds: nodes the model reads whole, text first.

LlamaIndex embeds a node's metadata (less its ``excluded_embed_metadata_keys``) before its text, and
SimpleDirectoryReader's ``file_path: /home/...`` then starts every chunk: tokens alike across the
corpus that crowd out the text, so that opposite instructions agree on the top hit. InstEmb (like
``instemb-rag index``) embeds the text: this SentenceSplitter adds the file reader's keys to each
node's excluded keys (LlamaIndex's own switch), so the nodes keep that metadata for filters,
citations and the LLM, and the embedding sees the text and any other metadata.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llama_index.core.bridge.pydantic import Field
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.schema import BaseNode

# What SimpleDirectoryReader's default file_metadata adds to every document.
FILE_METADATA_KEYS = (
    "file_path",
    "file_name",
    "file_type",
    "file_size",
    "creation_date",
    "last_modified_date",
    "last_accessed_date",
)


class InstEmbNodeParser(SentenceSplitter):
    """SentenceSplitter whose nodes leave ``excluded_embed_metadata_keys`` out of the embedded text."""

    excluded_embed_metadata_keys: list[str] = Field(
        default_factory=lambda: list(FILE_METADATA_KEYS),
        description="Metadata keys added to every node's excluded_embed_metadata_keys (kept, not embedded).",
    )

    def __init__(self, excluded_embed_metadata_keys: Sequence[str] = FILE_METADATA_KEYS, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.excluded_embed_metadata_keys = list(excluded_embed_metadata_keys)

    @classmethod
    def class_name(cls) -> str:
        return "InstEmbNodeParser"

    def _parse_nodes(self, nodes: Sequence[BaseNode], show_progress: bool = False, **kwargs: Any) -> list[BaseNode]:
        # Split nodes inherit their document's excluded keys, so they go on a copy of each document.
        return super()._parse_nodes([self._excluding(node) for node in nodes], show_progress, **kwargs)

    def _excluding(self, node: BaseNode) -> BaseNode:
        missing = [key for key in self.excluded_embed_metadata_keys if key not in node.excluded_embed_metadata_keys]
        if not missing:
            return node
        return node.model_copy(update={"excluded_embed_metadata_keys": [*node.excluded_embed_metadata_keys, *missing]})
