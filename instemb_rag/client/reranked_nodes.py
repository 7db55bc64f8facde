"""The reader over LlamaIndex nodes (the integration's InstEmbRerank is a thin shell over this)."""

from __future__ import annotations

from typing import Any

__all__ = ["call_instruction", "reranked_nodes"]


def call_instruction(given: Any, query_bundle, default: str | None, unset: Any) -> str | None:
    """A call's instruction: the one given, else the bundle's own (an InstructionQueryBundle's, or
    an InstructedText query string's), else the postprocessor's ``default``."""
    from .carried import instruction_of

    if given is not unset:
        return given
    carried = getattr(query_bundle, "instruction", None)
    carried = carried if carried is not None else instruction_of(query_bundle.query_str)
    return default if carried is None else carried


def reranked_nodes(reranker, nodes: list, query: str, instruction: str | None, top_n: int | None) -> list:
    """``nodes`` (NodeWithScore: its score is the first stage's) re-scored with the fused score, best
    first, the ``top_n`` best (None: all)."""
    from llama_index.core.schema import MetadataMode, NodeWithScore

    if not nodes:
        return []
    texts = [item.node.get_content(metadata_mode=MetadataMode.NONE) for item in nodes]
    fused = reranker.score(query, instruction, texts, [float(item.score or 0.0) for item in nodes])
    ranked = sorted((NodeWithScore(node=item.node, score=s) for item, s in zip(nodes, fused)), key=lambda n: -n.score)
    return ranked[:top_n] if top_n else ranked
