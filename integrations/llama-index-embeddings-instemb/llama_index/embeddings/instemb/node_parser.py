"""The node parser ``InstEmbEmbedding.node_parser()`` builds: nodes the model reads whole, text first.

LlamaIndex embeds ``node.get_content(MetadataMode.EMBED)``: the node's metadata, less its
``excluded_embed_metadata_keys``, then the text. SimpleDirectoryReader keeps ``file_path`` in that
string, so every chunk starts with ``file_path: /home/.../docs/...``: tokens that carry nothing
about the content, are alike across the whole corpus and crowd out the text, so that opposite
instructions end up with the same top hit. InstEmb (like ``instemb-rag index``) embeds the text.

``InstEmbNodeParser`` is LlamaIndex's SentenceSplitter, counting the model's own tokens, that also
adds the file reader's keys to each node's ``excluded_embed_metadata_keys`` (LlamaIndex's own
metadata-mode switch): the nodes keep that metadata (for filters, citations and the LLM, which
still sees it) and the embedding sees the text and any other metadata.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llama_index.core.bridge.pydantic import Field
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.schema import BaseNode

from instemb_rag.errors import InstEmbError

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
        # The split nodes inherit their document's excluded keys (build_nodes_from_splits), so the
        # keys are added to a copy of each document: the caller's documents are left as they were.
        return super()._parse_nodes([self._excluding(node) for node in nodes], show_progress, **kwargs)

    def _excluding(self, node: BaseNode) -> BaseNode:
        missing = [key for key in self.excluded_embed_metadata_keys if key not in node.excluded_embed_metadata_keys]
        if not missing:
            return node
        return node.model_copy(update={"excluded_embed_metadata_keys": [*node.excluded_embed_metadata_keys, *missing]})


def node_parser_for(
    embed_model: Any,
    chunk_size: int | None,
    chunk_overlap: int | None,
    excluded_embed_metadata_keys: Sequence[str],
    **kwargs: Any,
) -> InstEmbNodeParser:
    """InstEmbEmbedding.node_parser: sized to what the model reads, on its own tokenizer."""
    from instemb_rag.client.limits import document_reader, document_tokenizer
    from instemb_rag.index.options import IndexOptions

    limit = embed_model.document_token_limit
    chunk_size = embed_model.recommended_chunk_size if chunk_size is None else chunk_size
    if chunk_size > limit:
        raise InstEmbError(
            f"chunk_size={chunk_size} is more than the {limit} tokens of a document the model reads "
            f"({document_reader(embed_model.encoder)}): the end of longer chunks would be cut off. "
            f"Use chunk_size <= {limit}."
        )
    overlap = min(IndexOptions.chunk_overlap, chunk_size // 4) if chunk_overlap is None else chunk_overlap
    # The tokens of the document side's most restrictive part, as the CLI's ChunkSplitter counts
    # (instemb_rag/index/documents.py): the LLM's, or a sentence encoder's that embeds documents.
    tokenizer = document_tokenizer(embed_model.encoder)
    return InstEmbNodeParser(
        excluded_embed_metadata_keys=excluded_embed_metadata_keys,
        chunk_size=chunk_size,
        chunk_overlap=overlap,
        tokenizer=lambda text: tokenizer(text, add_special_tokens=False).input_ids,
        **kwargs,
    )
