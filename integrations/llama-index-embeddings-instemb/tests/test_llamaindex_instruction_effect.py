"""InstEmbEmbedding and InstEmbRetriever over an instruction-effect encoder (issue 56): queries
take ``instruction_strength`` (a field, a view, per call, per retrieval; cached per strength), the
retriever searches an instemb-rag index or a VectorStoreIndex with it, a server's model card says
the model takes it (RemoteEncoder), and a model without the knob refuses it, as ``llm_weight``."""

from __future__ import annotations

import types

import numpy as np
import pytest
from llama_index.core import VectorStoreIndex
from llama_index.core.schema import TextNode

from instemb_rag.errors import InstEmbError
from llama_index.embeddings.instemb import InstEmbEmbedding, InstEmbRetriever

pytest.importorskip("sentence_transformers")

QUERY, INSTRUCTION = "which tent is light ?", "focus on weight"


@pytest.fixture(scope="module")
def effect(tiny_model_dir, tiny_st_dir):
    from instemb_rag.encoder.load import untrained_effect

    return untrained_effect(
        str(tiny_model_dir), str(tiny_st_dir), instruction_strength=2.0, device="cpu", lookahead_length=2
    )


def under(encoder, strength, instruction=INSTRUCTION, query=QUERY) -> np.ndarray:
    return encoder.encode_queries([query], [instruction], instruction_strength=strength)[0]


def test_queries_take_the_strength_as_a_field_a_view_and_per_call(effect):
    embed_model = InstEmbEmbedding.from_encoder(effect, query_instruction=INSTRUCTION)
    np.testing.assert_allclose(embed_model.get_query_embedding(QUERY), under(effect, None), atol=1e-5)
    fixed = InstEmbEmbedding.from_encoder(effect, query_instruction=INSTRUCTION, instruction_strength=0.5)
    assert fixed.instruction_strength == 0.5 and fixed.to_dict()["instruction_strength"] == 0.5
    np.testing.assert_allclose(fixed.get_query_embedding(QUERY), under(effect, 0.5), atol=1e-5)
    np.testing.assert_allclose(
        embed_model.with_instruction_strength(4.0).get_query_embedding(QUERY), under(effect, 4.0), atol=1e-5
    )
    first = embed_model.get_query_embedding_for(QUERY, INSTRUCTION, instruction_strength=1.0)
    second = embed_model.get_query_embedding_for(QUERY, INSTRUCTION, instruction_strength=3.0)
    np.testing.assert_allclose(first, under(effect, 1.0), atol=1e-5)
    np.testing.assert_allclose(second, under(effect, 3.0), atol=1e-5)  # its own cache entry
    bundle = embed_model.query_bundle(QUERY, INSTRUCTION, instruction_strength=0.0)
    assert bundle.instruction_strength == 0.0
    np.testing.assert_allclose(bundle.embedding, under(effect, 0.0), atol=1e-5)

    for wrong in (-1, 10.5, float("nan"), "strong"):
        with pytest.raises(InstEmbError, match="instruction_strength"):
            InstEmbEmbedding.from_encoder(effect, instruction_strength=wrong)
    with pytest.raises(InstEmbError, match="instruction-effect model, whose query-time knob is instruction_strength"):
        embed_model.get_query_embeddings([QUERY], None, llm_weight=0.5)


def test_a_model_without_the_knob_refuses_it(tiny_embed_model, tiny_model_dir, tiny_st_dir):
    from instemb_rag.encoder.load import untrained_mix

    with pytest.raises(InstEmbError, match="not an instruction-effect model: it ranks by one space"):
        InstEmbEmbedding.from_encoder(tiny_embed_model.encoder, instruction_strength=1.0)
    with pytest.raises(InstEmbError, match="ranks by one space"):
        tiny_embed_model.get_query_embeddings([QUERY], None, instruction_strength=1.0)
    with pytest.raises(InstEmbError, match="ranks by one space"):
        tiny_embed_model.with_instruction_strength(1.0)
    two_spaces = untrained_mix(str(tiny_model_dir), str(tiny_st_dir), device="cpu", lookahead_length=2)
    with pytest.raises(InstEmbError, match="two-space model, whose query-time knob is llm_weight"):
        InstEmbEmbedding.from_encoder(two_spaces).get_query_embedding_for(QUERY, instruction_strength=1.0)


def test_the_retriever_takes_a_strength_per_call(effect, tiny_docs, tmp_path):
    from instemb_rag.index import Index, Indexer, IndexOptions

    embed_model = InstEmbEmbedding.from_encoder(effect)
    documents = effect.encode_documents(tiny_docs)
    nodes = [TextNode(text=text, id_=f"doc{number}") for number, text in enumerate(tiny_docs)]
    retriever = InstEmbRetriever.from_vector_store_index(
        VectorStoreIndex(nodes, embed_model=embed_model), similarity_top_k=len(tiny_docs)
    )
    for strength in (0.0, 1.0, 5.0, None):
        hits = retriever.retrieve(QUERY, instruction=INSTRUCTION, instruction_strength=strength)
        cosines = documents @ under(effect, strength)
        for hit in hits:
            assert hit.score == pytest.approx(float(cosines[int(hit.node.node_id[3:])]), abs=1e-4)
    with pytest.raises(InstEmbError, match="outside|between 0 and 10"):
        retriever.retrieve(QUERY, instruction_strength=11)

    # An instemb-rag index folder, searched through the retriever with the strength per call.
    folder = tmp_path / "docs"
    folder.mkdir()
    for number, text in enumerate(tiny_docs):
        (folder / f"doc{number}.txt").write_text(text)
    Indexer(effect, IndexOptions(index_dir=tmp_path / "index", chunk_overlap=4)).run(folder)
    with InstEmbRetriever.from_instemb_index(
        Index.open(tmp_path / "index", encoder=effect), similarity_top_k=3
    ) as on_index:
        for strength in (0.0, 3.0):
            hits = on_index.retrieve(QUERY, instruction=INSTRUCTION, instruction_strength=strength)
            query = under(effect, strength)
            for hit in hits:
                expected = float(effect.encode_documents([hit.node.text])[0] @ query)
                assert hit.score == pytest.approx(expected, abs=1e-4)


def test_a_server_of_the_effect_model_takes_the_strength(effect, monkeypatch):
    """RemoteEncoder against the server in-process (its HTTP client is the app's TestClient)."""
    pytest.importorskip("fastapi")
    import httpx
    from fastapi.testclient import TestClient

    from instemb_rag.serve import ServeOptions, ServerState, create_app
    from llama_index.embeddings.instemb import remote

    state = ServerState(effect, ServeOptions())
    app = create_app(state)

    def client(base_url, headers, timeout):
        return TestClient(app, base_url=base_url, headers=headers)

    monkeypatch.setattr(remote, "httpx", types.SimpleNamespace(Client=client, HTTPError=httpx.HTTPError))
    state.batcher.start()
    try:
        with InstEmbEmbedding(
            base_url="http://test", instruction_strength=1.0, query_instruction=INSTRUCTION
        ) as embedding:
            encoder = embedding.encoder
            assert encoder.takes_instruction_strength and not encoder.takes_llm_weight
            np.testing.assert_allclose(embedding.get_query_embedding(QUERY), under(effect, 1.0), atol=1e-5)
            np.testing.assert_allclose(
                embedding.get_query_embedding_for(QUERY, INSTRUCTION, instruction_strength=3.5),
                under(effect, 3.5),
                atol=1e-5,
            )
            with pytest.raises(InstEmbError, match="instruction_strength"):
                encoder.encode_queries([QUERY], None, instruction_strength=12)
            with pytest.raises(InstEmbError, match="whose query-time knob is instruction_strength"):
                encoder.encode_queries([QUERY], None, llm_weight=0.5)
    finally:
        state.close()
