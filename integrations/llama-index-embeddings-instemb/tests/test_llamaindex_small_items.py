"""The small things an app trips over: each is a clear error or the right result."""

from __future__ import annotations

import asyncio

import pytest
from llama_index.core import Document, VectorStoreIndex

from instemb_rag import InstEmbEncoder
from instemb_rag.errors import InstEmbError
from llama_index.embeddings.instemb import InstEmbEmbedding, InstEmbRetriever

QUERY = "which tent is light ?"


@pytest.mark.parametrize(
    ("query", "message"),
    [
        (None, r"The query #0 is NoneType, not a string\.$"),
        (b"tent", r"The query #0 is bytes, not a string \(decode bytes first"),
        (3, "The query #0 is int, not a string"),
    ],
)
def test_a_query_that_is_not_text_is_refused(tiny_embed_model, query, message):
    with pytest.raises(InstEmbError, match=message):
        tiny_embed_model.get_query_embedding(query)
    with pytest.raises(InstEmbError, match=message):
        asyncio.run(tiny_embed_model.aget_query_embedding(query))
    with pytest.raises(InstEmbError, match=message):
        tiny_embed_model.get_query_embedding_for(query, "focus on weight")
    assert len(tiny_embed_model.query_cache) == 0  # nothing was embedded as "None" or "b'tent'"


def test_a_document_that_is_not_text_is_refused(tiny_embed_model):
    with pytest.raises(InstEmbError, match="The document #1 is bytes, not a string"):
        tiny_embed_model.get_text_embedding_batch(["a tent .", b"a stove ."])


@pytest.mark.parametrize("query", ["", "   ", "\n\t"])
def test_an_empty_query_is_refused_as_by_the_retriever_and_the_cli(tiny_embed_model, query):
    with pytest.raises(InstEmbError, match="^The query is empty: give the text to search for.$"):
        tiny_embed_model.get_query_embedding(query)
    with pytest.raises(InstEmbError, match=r"The query is empty.*\(query #1\)"):
        tiny_embed_model.get_query_embeddings([QUERY, query], "focus on weight")
    with pytest.raises(InstEmbError, match="The query is empty"):
        tiny_embed_model.query_bundle(query, "focus on weight")


def test_a_lone_surrogate_is_named(tiny_embed_model):
    broken = "a tent \udce9 light"  # what errors="surrogateescape" makes of a stray byte
    with pytest.raises(
        InstEmbError, match=r"query #0 is not valid Unicode: .*'\\udce9'\) at character 7.*errors='replace'"
    ):
        tiny_embed_model.get_query_embedding(broken)
    with pytest.raises(InstEmbError, match=r"document #0 is not valid Unicode: .*lone surrogate"):
        tiny_embed_model.get_text_embedding(broken)
    # Valid non-ASCII text is fine.
    assert len(tiny_embed_model.get_query_embedding("a tent \u00e9 light")) == tiny_embed_model.dimension


def test_retrieving_after_close_says_so(index_dir, tiny_embed_model):
    retriever = InstEmbRetriever.from_instemb_index(index_dir, embed_model=tiny_embed_model)
    assert retriever.retrieve(QUERY)
    retriever.close()
    retriever.close()  # twice is harmless
    for call in (lambda: retriever.retrieve(QUERY), lambda: asyncio.run(retriever.aretrieve(QUERY))):
        with pytest.raises(InstEmbError, match=r"This retriever was closed .*from_instemb_index"):
            call()


def test_from_documents_shows_embedding_progress(tiny_embed_model, tiny_docs, capfd):
    VectorStoreIndex.from_documents([Document(text=text) for text in tiny_docs], embed_model=tiny_embed_model)
    assert "Generating embeddings" not in capfd.readouterr().err
    VectorStoreIndex.from_documents(
        [Document(text=text) for text in tiny_docs], embed_model=tiny_embed_model, show_progress=True
    )
    err = capfd.readouterr().err
    assert "Generating embeddings: 100%" in err and "5/5" in err
    tiny_embed_model.get_text_embedding_batch(tiny_docs, show_progress=True)
    err = capfd.readouterr().err
    assert "Generating embeddings: 100%" in err and "5/5" in err
    asyncio.run(tiny_embed_model.aget_text_embedding_batch(tiny_docs, show_progress=True))
    err = capfd.readouterr().err
    assert "Generating embeddings: 100%" in err and "5/5" in err


def test_an_index_built_with_other_settings_says_why_it_needs_the_embed_model(tiny_model_dir, tiny_docs, tmp_path):
    from instemb_rag.index import Indexer, IndexOptions

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for number, text in enumerate(tiny_docs):
        (corpus / f"doc{number}.txt").write_text(text)
    # Built through the Python API with non-default settings (the model's own: lookahead 0, max_length 512).
    encoder = InstEmbEncoder.from_pretrained(tiny_model_dir, device="cpu", lookahead_length=4, max_length=64)
    Indexer(encoder, IndexOptions(index_dir=tmp_path / "by-path", model_label=str(tiny_model_dir))).run(corpus)
    Indexer(encoder, IndexOptions(index_dir=tmp_path / "by-label", model_label="tiny")).run(corpus)

    with pytest.raises(InstEmbError) as caught:
        InstEmbRetriever.from_instemb_index(tmp_path / "by-path", device="cpu")
    message = str(caught.value)
    assert f"was embedded by encoder {encoder.fingerprint}" in message
    assert "loaded with its own settings (" in message and "max_length=512" in message
    assert "records the model, not the settings it ran with" in message
    assert "embed_model=InstEmbEmbedding(model_path, pooling=..., lookahead_length=..., max_length=..." in message

    with pytest.raises(InstEmbError, match=r"records its model as 'tiny', which cannot be loaded here .*model_label"):
        InstEmbRetriever.from_instemb_index(tmp_path / "by-label", device="cpu")

    # With the settings it was built with, it opens, from either folder.
    embed_model = InstEmbEmbedding(tiny_model_dir, device="cpu", lookahead_length=4, max_length=64)
    for folder in ("by-path", "by-label"):
        with InstEmbRetriever.from_instemb_index(tmp_path / folder, embed_model=embed_model) as retriever:
            assert len(retriever.retrieve(QUERY)) == 5
