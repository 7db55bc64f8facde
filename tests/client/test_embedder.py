"""Embedder (instemb_rag/client/embedder.py), on the tiny model: the inputs of an embedding call are
checked as they enter (query_inputs, document_inputs), and the document instruction it is made with
is refused by a document side that reads none and read by every document call, the token limit and
the chunk sizes."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from instemb_rag.client.embedder import Embedder
from instemb_rag.client.limits import TruncationWarning
from instemb_rag.errors import InstEmbError
from instemb_rag.knobs import KnobError

QUERY = "which tent is light ?"


def test_query_inputs_check_texts_resolve_instructions_and_require_the_knobs(tiny_encoder):
    embedder = Embedder(tiny_encoder)
    queries, instructions, knobs = embedder.query_inputs([QUERY, QUERY], [None, " "], "focus on weight", [{}, {}])
    assert queries == [QUERY, QUERY] and instructions == ["focus on weight", None] and knobs == [{}, {}]
    with pytest.raises(InstEmbError, match=r"The query is empty.*\(query #1\)"):
        embedder.query_inputs([QUERY, "  "], None, None, [{}, {}])
    with pytest.raises(InstEmbError, match="query #0 is bytes"):
        embedder.query_inputs([b"tent"], None, None, [{}])
    with pytest.raises(InstEmbError, match="2 queries but 1 instructions"):
        embedder.query_inputs([QUERY, QUERY], ["focus on weight"], None, [{}, {}])
    with pytest.raises(KnobError, match="ranks by one space"):  # a knob the model lacks, named
        embedder.query_inputs([QUERY], None, None, [{"llm_weight": 0.5}])
    vectors = embedder.embed_queries(queries, instructions, knobs, batch_size=4)
    np.testing.assert_allclose(vectors, tiny_encoder.encode_queries(queries, instructions), atol=1e-5)


def test_document_inputs_check_and_warn_once_per_call(tiny_encoder):
    embedder = Embedder(tiny_encoder)
    with pytest.raises(InstEmbError, match="document #1 is bytes"):
        embedder.document_inputs(["a tent .", b"a stove ."])
    with pytest.warns(TruncationWarning) as caught:
        texts = embedder.document_inputs(["a tent .", " ".join(["tent"] * 80), " ".join(["stove"] * 90)])
    assert len(caught) == 1 and "2 of this call's 3 documents were" in str(caught[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter("error", TruncationWarning)
        assert embedder.document_inputs(("a tent .",)) == ["a tent ."]  # any sequence, as a list
    assert len(texts) == 3


def test_the_document_instruction_is_read_by_every_document_call(tiny_encoder):
    plain, instructed = Embedder(tiny_encoder), Embedder(tiny_encoder, document_instruction="what is this")
    assert Embedder(tiny_encoder, document_instruction="  ").document_instruction is None  # blank: none
    docs = ["this tent is light .", "the stove is heavy ."]
    np.testing.assert_allclose(
        instructed.embed_documents(docs, batch_size=4), tiny_encoder.encode_documents(docs, "what is this"), atol=1e-5
    )
    assert instructed.document_token_limit == plain.document_token_limit - 5  # "\n Instruction : what is this"
    assert instructed.chunk_settings()[0] == instructed.document_token_limit  # the CLI's 256 does not fit
    with pytest.raises(InstEmbError, match=f"chunk_size={plain.document_token_limit + 1} is more than"):
        plain.chunk_settings(plain.document_token_limit + 1)


def test_a_document_side_that_reads_no_instruction_refuses_one(tiny_two_tower):
    with pytest.raises(InstEmbError, match="sentence encoder.*reads no instruction"):
        Embedder(tiny_two_tower, document_instruction="what is this")
    assert Embedder(tiny_two_tower).document_instruction is None
