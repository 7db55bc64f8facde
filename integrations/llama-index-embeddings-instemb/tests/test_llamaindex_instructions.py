"""One instruction semantics on every path: stock retrievers, query engines, several strings, the
CLI and the server's default, MetadataFilters on an index folder."""

from __future__ import annotations

import inspect
import json

import faiss
import numpy as np
import pytest
from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.llms import MockLLM
from llama_index.core.schema import QueryBundle, TextNode
from llama_index.core.vector_stores.types import FilterCondition, FilterOperator, MetadataFilter, MetadataFilters
from llama_index.vector_stores.faiss import FaissVectorStore
from typer.testing import CliRunner

from instemb_rag.cli import app
from instemb_rag.cli.query import query_command
from instemb_rag.errors import InstEmbError
from instemb_rag.instructions import DEFAULT_QUERY_INSTRUCTION
from instemb_rag.serve.schemas import EmbeddingRequest, SearchRequest
from llama_index.embeddings.instemb import InstEmbEmbedding, InstEmbRetriever, InstructionQueryBundle

QUERY = "which tent is good for a camp trip ?"
DURABILITY = "focus on durability"


def faiss_index(embed_model, docs) -> VectorStoreIndex:
    nodes = [TextNode(text=text, id_=f"doc{i}") for i, text in enumerate(docs)]
    store = FaissVectorStore(faiss_index=faiss.IndexFlatIP(embed_model.dimension))
    return VectorStoreIndex(
        nodes, storage_context=StorageContext.from_defaults(vector_store=store), embed_model=embed_model
    )


def scores(results) -> dict[str, float]:
    return {item.node.node_id: item.score for item in results}


def expected_scores(embed_model, docs, query_vector) -> dict[str, float]:
    return {f"doc{i}": float(s) for i, s in enumerate(embed_model.encoder.encode_documents(docs) @ query_vector)}


def assert_scores(results, expected) -> None:
    got = scores(results)
    np.testing.assert_allclose([got[name] for name in expected], list(expected.values()), atol=1e-4)


def test_stock_retriever_and_query_engine_embed_a_bundle_under_its_instruction(tiny_embed_model, tiny_docs):
    index = faiss_index(tiny_embed_model, tiny_docs)
    durability = expected_scores(
        tiny_embed_model, tiny_docs, tiny_embed_model.encoder.encode_queries([QUERY], DURABILITY)[0]
    )
    bundle = InstructionQueryBundle(query_str=QUERY, instruction=DURABILITY)
    assert_scores(index.as_retriever(similarity_top_k=5).retrieve(bundle), durability)
    engine = index.as_query_engine(llm=MockLLM(), similarity_top_k=5)
    assert_scores(engine.query(bundle).source_nodes, durability)
    # A view with another default instruction, for as_retriever / as_query_engine(embed_model=...).
    view = tiny_embed_model.with_instruction(DURABILITY)
    assert_scores(index.as_retriever(similarity_top_k=5, embed_model=view).retrieve(QUERY), durability)
    view_engine = index.as_query_engine(llm=MockLLM(), similarity_top_k=5, embed_model=view)
    assert_scores(view_engine.query(QUERY).source_nodes, durability)
    bare = InstructionQueryBundle(query_str=QUERY, instruction="")
    expected_bare = expected_scores(tiny_embed_model, tiny_docs, tiny_embed_model.encoder.encode_queries([QUERY])[0])
    assert_scores(index.as_retriever(similarity_top_k=5).retrieve(bare), expected_bare)


def test_several_query_strings_are_batched_under_the_instruction_and_averaged(tiny_embed_model, tiny_docs):
    index = faiss_index(tiny_embed_model, tiny_docs)
    strings = ["a light tent for a trip .", QUERY]  # e.g. HyDE's document + the original query
    mean = tiny_embed_model.encoder.encode_queries(strings, DURABILITY).mean(axis=0)
    expected = expected_scores(tiny_embed_model, tiny_docs, mean)
    retriever = InstEmbRetriever.from_vector_store_index(index, similarity_top_k=5)
    hyde = QueryBundle(query_str=QUERY, custom_embedding_strs=strings)
    assert_scores(retriever.retrieve(hyde, instruction=DURABILITY), expected)
    stock_bundle = InstructionQueryBundle(query_str=QUERY, custom_embedding_strs=strings, instruction=DURABILITY)
    assert_scores(index.as_retriever(similarity_top_k=5).retrieve(stock_bundle), expected)
    with pytest.raises(InstEmbError, match="query is empty"):
        retriever.retrieve(QueryBundle(query_str=QUERY, custom_embedding_strs=[QUERY, " "]))


def test_the_default_instruction_is_one_for_cli_server_and_llamaindex(tiny_model_dir, tmp_path, tiny_docs):
    assert InstEmbEmbedding.model_fields["query_instruction"].default == DEFAULT_QUERY_INSTRUCTION
    assert inspect.signature(InstEmbEmbedding.__init__).parameters["query_instruction"].default == (
        DEFAULT_QUERY_INSTRUCTION
    )
    assert inspect.signature(query_command).parameters["instruction"].default.default == DEFAULT_QUERY_INSTRUCTION
    assert SearchRequest.model_fields["instruction"].default == DEFAULT_QUERY_INSTRUCTION
    assert EmbeddingRequest.model_fields["instruction"].default == DEFAULT_QUERY_INSTRUCTION

    docs = tmp_path / "docs"
    docs.mkdir()
    for number, text in enumerate(tiny_docs):
        (docs / f"doc{number}.txt").write_text(text)
    common = ["--index-dir", str(tmp_path / "index"), "--model", str(tiny_model_dir), "--device", "cpu"]
    assert CliRunner().invoke(app, ["index", str(docs), "--no-progress", *common]).exit_code == 0
    result = CliRunner().invoke(app, ["query", QUERY, "-k", "5", "--json", *common])
    assert result.exit_code == 0, result.output
    cli_hits = [(hit["source"], hit["score"]) for hit in json.loads(result.stdout)["hits"]]
    with InstEmbRetriever.from_instemb_index(tmp_path / "index", similarity_top_k=5, device="cpu") as retriever:
        nodes = retriever.retrieve(QUERY)
    assert [node.node.metadata["source"] for node in nodes] == [source for source, _ in cli_hits]
    np.testing.assert_allclose([node.score for node in nodes], [score for _, score in cli_hits], atol=1e-5)


@pytest.fixture()
def folder_index(tiny_embed_model, tiny_docs, tmp_path):
    from instemb_rag.index import Indexer, IndexOptions

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for number, text in enumerate(tiny_docs):
        (corpus / f"doc{number}.txt").write_text(text)
    (corpus / "odd[1].txt").write_text(tiny_docs[1])  # glob characters are matched literally
    Indexer(tiny_embed_model.encoder, IndexOptions(index_dir=tmp_path / "index", model_label="tiny")).run(corpus)
    return tmp_path / "index"


def sources_for(index_dir, embed_model, filters) -> set[str]:
    with InstEmbRetriever.from_instemb_index(
        index_dir, embed_model=embed_model, similarity_top_k=10, filters=filters
    ) as retriever:
        return {node.node.metadata["source"] for node in retriever.retrieve(QUERY)}


def test_metadata_filters_on_an_index_folder(folder_index, tiny_embed_model):
    def source(operator, value):
        return MetadataFilter(key="source", operator=operator, value=value)

    eq, isin = FilterOperator.EQ, FilterOperator.IN
    cases = [
        (MetadataFilters(filters=[source(eq, "doc1.txt")]), {"doc1.txt"}),
        (MetadataFilters(filters=[source(eq, "odd[1].txt")]), {"odd[1].txt"}),
        (MetadataFilters(filters=[source(isin, ["doc0.txt", "doc3.txt", "gone.txt"])]), {"doc0.txt", "doc3.txt"}),
        (
            MetadataFilters(filters=[source(eq, "doc0.txt"), source(eq, "doc4.txt")], condition=FilterCondition.OR),
            {"doc0.txt", "doc4.txt"},
        ),
        (
            MetadataFilters(
                filters=[source(isin, ["doc0.txt", "doc2.txt"]), MetadataFilters(filters=[source(eq, "doc2.txt")])]
            ),
            {"doc2.txt"},
        ),
        (MetadataFilters(filters=[source(eq, "doc0.txt"), source(eq, "doc1.txt")]), set()),
    ]
    for filters, expected in cases:
        assert sources_for(folder_index, tiny_embed_model, filters) == expected, filters


def test_unsupported_metadata_filters_are_refused(folder_index, tiny_embed_model):
    refused = [
        (MetadataFilters(filters=[MetadataFilter(key="page", value=2)]), "metadata key 'page'"),
        (
            MetadataFilters(filters=[MetadataFilter(key="source", operator=FilterOperator.NE, value="doc0.txt")]),
            "operator '!='",
        ),
        (
            MetadataFilters(filters=[MetadataFilter(key="source", value="a")], condition=FilterCondition.NOT),
            "condition 'not'",
        ),
    ]
    for filters, message in refused:
        with pytest.raises(InstEmbError, match=message):
            InstEmbRetriever.from_instemb_index(folder_index, embed_model=tiny_embed_model, filters=filters)
    with pytest.raises(InstEmbError, match="not both"):
        InstEmbRetriever.from_instemb_index(
            folder_index,
            embed_model=tiny_embed_model,
            filter={"source": "doc*"},
            filters=MetadataFilters(filters=[MetadataFilter(key="source", value="doc0.txt")]),
        )
