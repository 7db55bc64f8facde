"""Text past what the model reads is cut: the embedding says so, and offers a node parser that fits.

The tiny model reads max_length=64 tokens: 4 look-ahead slots and the template's newline leave 60
tokens of a document (its word-level tokenizer makes one token per word).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from llama_index.core import Document, VectorStoreIndex
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.schema import MetadataMode

from instemb_rag.errors import InstEmbError
from llama_index.embeddings.instemb import InstEmbEmbedding, TruncationWarning

LIMIT = 60  # tokens of a document the tiny model reads


def words(count: int, word: str = "tent") -> str:
    return " ".join([word] * count)


def test_the_limit_is_counted_with_the_models_template(tiny_embed_model):
    encoder = tiny_embed_model.encoder
    assert tiny_embed_model.document_token_limit == LIMIT == encoder.max_length - len(encoder.build_ids("", None))
    assert tiny_embed_model.recommended_chunk_size == LIMIT  # the CLI's 256 does not fit this tiny model
    # A text of exactly LIMIT tokens is read whole; one more token and its end is cut.
    assert len(encoder.build_ids(words(LIMIT), None)) == encoder.max_length


def test_a_cut_document_is_said_once_per_call_naming_it_its_length_and_the_limit(tiny_embed_model):
    same_start = words(80)
    texts = ["this tent is light .", same_start + " light", "a stove .", same_start + " heavy durable", "rain ."]
    with pytest.warns(TruncationWarning) as caught:
        vectors = tiny_embed_model.get_text_embedding_batch(texts)  # two slices of embed_batch_size=4
    assert len(caught) == 1
    message = str(caught[0].message)
    assert "at most 60 tokens of a document" in message
    assert "2 of this call's 5 documents were" in message
    assert "document #3 ('tent tent" in message and "has 82 tokens: its last 22 were not embedded" in message
    assert "embed_model.node_parser()" in message
    # Which is why it matters: the two texts differ only past the limit, and get the same vector.
    np.testing.assert_allclose(vectors[1], vectors[3], atol=1e-6)

    async def embed():
        return await tiny_embed_model.aget_text_embedding_batch(texts)

    import asyncio

    with pytest.warns(TruncationWarning, match="2 of this call's 5 documents were"):
        asyncio.run(embed())


def test_texts_that_fit_embed_without_a_warning(tiny_embed_model, tiny_docs):
    with warnings.catch_warnings():
        warnings.simplefilter("error", TruncationWarning)
        tiny_embed_model.get_text_embedding_batch([*tiny_docs, words(LIMIT)])
        tiny_embed_model.get_query_embedding("which tent is light ?")


def test_a_cut_query_is_said_too(tiny_embed_model):
    # Under "focus on weight" (the fixture's default) the instruction takes 5 of the 60 tokens.
    with pytest.warns(TruncationWarning, match=r"at most 55 tokens of a query.*query #0 .*has 70 tokens"):
        tiny_embed_model.get_query_embedding(words(70))


def test_the_node_parser_makes_nodes_the_model_reads_whole(tiny_embed_model):
    long_document = Document(text=" ".join(["the tent is light and the stove is heavy ."] * 40))  # 400 tokens
    with pytest.warns(TruncationWarning):  # LlamaIndex's default splitter (1024 tokens) makes one node
        VectorStoreIndex.from_documents([long_document], embed_model=tiny_embed_model)

    parser = tiny_embed_model.node_parser()
    assert isinstance(parser, SentenceSplitter) and parser.chunk_size == LIMIT
    with warnings.catch_warnings():
        warnings.simplefilter("error", TruncationWarning)
        index = VectorStoreIndex.from_documents([long_document], embed_model=tiny_embed_model, transformations=[parser])
    nodes = list(index.docstore.docs.values())
    assert len(nodes) > 400 // LIMIT
    counts = [len(tiny_embed_model.encoder.tokenizer(n.get_content(MetadataMode.EMBED)).input_ids) for n in nodes]
    assert max(counts) <= LIMIT
    assert tiny_embed_model.node_parser(chunk_size=30, chunk_overlap=0).chunk_size == 30
    with pytest.raises(InstEmbError, match="chunk_size=61 is more than the 60 tokens"):
        tiny_embed_model.node_parser(chunk_size=61)


def test_the_limit_follows_the_document_instruction(tiny_embed_model):
    instructed = InstEmbEmbedding.from_encoder(tiny_embed_model.encoder, text_instruction="what is this")
    assert instructed.document_token_limit == LIMIT - 5  # "\n Instruction : what is this"
