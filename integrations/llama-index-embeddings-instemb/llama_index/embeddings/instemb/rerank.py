"""InstEmbRerank: the reader (instemb_rag.Reranker) as a LlamaIndex node postprocessor.

Used after any retriever, as LlamaIndex's rerankers are; the instruction comes with each call:
``postprocess_nodes(nodes, query_bundle, instruction=...)``, else the bundle's own (an
InstructionQueryBundle or an InstructedText query string), else the postprocessor's ``instruction``.
A node's score is taken as its first-stage score (the cosine InstEmbRetriever gives) and replaced
by the fused score the product ranks by.
"""

from __future__ import annotations

from typing import Any

from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle

from .query import instruction_of

_UNSET: Any = object()


class InstEmbRerank(BaseNodePostprocessor):
    """Re-score retrieved nodes with InstEmb's reader under an instruction, keep the ``top_n`` best."""

    top_n: int | None = Field(default=None, description="Nodes kept (None: every node given).")
    model_folder: str | None = Field(
        default=None,
        description="A model folder with a reader, or a trained reader's final/ (None: the shipped default).",
    )
    instruction: str | None = Field(default=None, description="The instruction of a call that gives none.")
    _reranker: Any = PrivateAttr(default=None)

    @classmethod
    def class_name(cls) -> str:
        return "InstEmbRerank"

    def _reader(self):
        if self._reranker is None:
            from instemb_rag import Reranker

            self._reranker = Reranker.from_pretrained(self.model_folder)
        return self._reranker

    def postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None, query_str: str | None = None,
        instruction: str | None = _UNSET,
    ) -> list[NodeWithScore]:  # fmt: skip
        if query_str is not None and query_bundle is None:
            query_bundle = QueryBundle(query_str)
        if query_bundle is None:
            raise ValueError("InstEmbRerank needs the query: pass query_bundle or query_str.")
        if instruction is _UNSET:
            bundle_instruction = getattr(query_bundle, "instruction", None)
            instruction = (
                bundle_instruction if bundle_instruction is not None else instruction_of(query_bundle.query_str)
            )
            instruction = self.instruction if instruction is None else instruction
        return self._ranked(nodes, str(query_bundle.query_str), instruction)

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        return self.postprocess_nodes(nodes, query_bundle)

    def _ranked(self, nodes: list[NodeWithScore], query: str, instruction: str | None) -> list[NodeWithScore]:
        if not nodes:
            return []
        texts = [node.node.get_content(metadata_mode=MetadataMode.NONE) for node in nodes]
        first = [float(node.score or 0.0) for node in nodes]
        fused = self._reader().score(query, instruction, texts, first)
        ranked = [NodeWithScore(node=node.node, score=score) for node, score in zip(nodes, fused)]
        ranked.sort(key=lambda item: item.score, reverse=True)
        return ranked[: self.top_n] if self.top_n else ranked
