"""InstEmbRetriever over an index folder written by instemb-rag's Indexer (tiny model)."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from llama_index.core.schema import NodeWithScore, TextNode

from instemb_rag import InstEmbEncoder
from instemb_rag.errors import InstEmbError
from llama_index.embeddings.instemb import InstEmbEmbedding, InstEmbRetriever

index_api = pytest.importorskip("instemb_rag.index", reason="instemb_rag.index is not available")

QUERY = "which tent is good for a camp trip ?"
INSTRUCTIONS = ("focus on weight", "focus on durability")


def test_retrieval_over_an_instemb_index_follows_the_instruction(index_dir, tiny_embed_model, tiny_docs):
    encoder = tiny_embed_model.encoder
    with InstEmbRetriever.from_instemb_index(index_dir, embed_model=tiny_embed_model, similarity_top_k=5) as retriever:
        for instruction in INSTRUCTIONS:
            results = retriever.retrieve(QUERY, instruction=instruction)
            assert all(isinstance(item, NodeWithScore) and isinstance(item.node, TextNode) for item in results)
            scores = encoder.encode_documents(tiny_docs) @ encoder.encode_queries([QUERY], instruction)[0]
            expected = [f"doc{i}.txt" for i in np.argsort(-scores)]
            assert [item.node.metadata["source"] for item in results] == expected
            np.testing.assert_allclose([item.score for item in results], np.sort(scores)[::-1], atol=1e-4)
            assert results[0].node.get_content() == tiny_docs[int(np.argmax(scores))]
        filtered = InstEmbRetriever.from_instemb_index(
            retriever.backend.index, embed_model=tiny_embed_model, filter={"source": "doc[12].txt"}
        )
        assert {n.node.metadata["source"] for n in filtered.retrieve(QUERY, instruction="")} == {"doc1.txt", "doc2.txt"}

        async def both():
            return [await retriever.aretrieve(QUERY, instruction=i) for i in INSTRUCTIONS]

        for instruction, results in zip(INSTRUCTIONS, asyncio.run(both())):
            sync = retriever.retrieve(QUERY, instruction=instruction)
            assert [n.node.node_id for n in results] == [n.node.node_id for n in sync]


def test_instemb_index_refuses_another_encoder(tiny_model_dir, tmp_path, tiny_embed_model, tiny_docs):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.txt").write_text(tiny_docs[0])
    options = index_api.IndexOptions(index_dir=tmp_path / "index", model_label="tiny")
    index_api.Indexer(tiny_embed_model.encoder, options).run(corpus)
    other = InstEmbEmbedding.from_encoder(
        InstEmbEncoder.from_pretrained(tiny_model_dir, device="cpu", lookahead_length=2, max_length=64)
    )
    with pytest.raises(InstEmbError):
        InstEmbRetriever.from_instemb_index(tmp_path / "index", embed_model=other)
    with index_api.Index.open(tmp_path / "index", encoder=tiny_embed_model.encoder) as opened:
        with pytest.raises(InstEmbError, match="re-index"):
            InstEmbRetriever.from_instemb_index(opened, embed_model=other)
