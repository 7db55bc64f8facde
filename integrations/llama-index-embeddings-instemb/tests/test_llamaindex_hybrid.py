"""InstEmbRetriever.from_instemb_index(..., hybrid=...): the index folder's hybrid search, passed through."""

from __future__ import annotations

import pytest

from llama_index.embeddings.instemb import InstEmbRetriever

index_api = pytest.importorskip("instemb_rag.index", reason="instemb_rag.index is not available")


def test_hybrid_retrieval_equals_index_search(tiny_embed_model, tiny_docs, tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for number, text in enumerate(tiny_docs):
        (corpus / f"doc{number}.txt").write_text(text)
    options = index_api.IndexOptions(index_dir=tmp_path / "index", model_label="tiny")
    index_api.Indexer(tiny_embed_model.encoder, options).run(corpus)
    query, instruction = "tent stove", "focus on the burner"
    with InstEmbRetriever.from_instemb_index(
        tmp_path / "index", embed_model=tiny_embed_model, similarity_top_k=3, hybrid="z", hybrid_weight=0.8
    ) as retriever:
        results = retriever.retrieve(query, instruction=instruction)
        expected = retriever.backend.index.search(query, instruction, k=3, hybrid="z", hybrid_weight=0.8)
        dense = retriever.backend.index.search(query, instruction, k=3)
    assert [item.node.metadata["chunk_id"] for item in results] == [hit.chunk_id for hit in expected]
    assert [item.score for item in results] == pytest.approx([hit.score for hit in expected])
    assert [item.score for item in results] != pytest.approx([hit.score for hit in dense])  # fused, not cosine
