"""InstEmbRerank: the reader (instemb_rag.Reranker) as a node postprocessor after any retriever; the
instruction per call (``instruction=``), else the bundle's, else the field (instemb_rag/client/reranked_nodes.py)."""

from __future__ import annotations

from typing import Any

from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import QueryBundle

from instemb_rag.client.reranked_nodes import call_instruction, reranked_nodes

_UNSET: Any = object()


class InstEmbRerank(BaseNodePostprocessor):
    top_n: int | None = Field(default=None, description="Nodes kept (None: all).")
    model_folder: str | None = Field(default=None, description="A folder with a reader (None: the default's).")
    instruction: str | None = Field(default=None, description="The instruction of a call that gives none.")
    _reranker: Any = PrivateAttr(default=None)

    @classmethod
    def class_name(cls) -> str:
        return "InstEmbRerank"

    def postprocess_nodes(self, nodes, query_bundle=None, query_str=None, instruction: Any = _UNSET) -> list:
        if query_bundle is None and query_str is None:
            raise ValueError("InstEmbRerank needs the query: pass query_bundle or query_str.")
        bundle = query_bundle or QueryBundle(query_str)
        if self._reranker is None:
            from instemb_rag import Reranker

            self._reranker = Reranker.from_pretrained(self.model_folder)
        chosen = call_instruction(instruction, bundle, self.instruction, _UNSET)
        return reranked_nodes(self._reranker, nodes, str(bundle.query_str), chosen, self.top_n)

    def _postprocess_nodes(self, nodes, query_bundle=None) -> list:
        return self.postprocess_nodes(nodes, query_bundle)
