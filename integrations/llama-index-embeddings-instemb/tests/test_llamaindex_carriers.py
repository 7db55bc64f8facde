"""What carries a query's instruction and knobs through LlamaIndex: an InstructionQueryBundle's
query string and embedding strings (InstructedText), a call's instruction over a bundle's own, the
knobs as one mapping, and the local Qdrant store's async client."""

from __future__ import annotations

import asyncio
import pickle
from dataclasses import replace

import pytest
from llama_index.core.schema import QueryBundle

from instemb_rag.errors import InstEmbError
from llama_index.embeddings.instemb import InstructedText, InstructionQueryBundle
from llama_index.embeddings.instemb.query import bundle_with_instruction, instruction_of

QUERY = "which tent is light ?"


def test_a_bundles_strings_carry_its_instruction_and_knobs():
    bundle = InstructionQueryBundle(QUERY, custom_embedding_strs=["a light tent .", QUERY], instruction="x")
    assert bundle.query_str == QUERY and instruction_of(bundle.query_str) == "x"  # what a fusion LLM is given
    assert [instruction_of(text) for text in bundle.embedding_strs] == ["x", "x"]
    weighted = InstructionQueryBundle(QUERY, llm_weight=0.25)
    assert weighted.llm_weight == 0.25 and weighted.knobs == {"llm_weight": 0.25}
    assert replace(weighted, embedding=[1.0]).llm_weight == 0.25  # dataclasses.replace keeps them
    with pytest.raises(InstEmbError, match="between 0 and 1"):
        InstructionQueryBundle(QUERY, llm_weight=2)
    with pytest.raises(InstEmbError, match="must be a string"):
        InstructionQueryBundle(QUERY, instruction=3)


def test_an_instructed_text_pickles_with_what_it_carries():
    text = pickle.loads(pickle.dumps(InstructedText(QUERY, "x", {"instruction_strength": 2.0})))
    assert (str(text), text.instruction, text.instruction_strength, text.llm_weight) == (QUERY, "x", 2.0, None)


def test_a_calls_instruction_replaces_the_bundles_own():
    own = InstructionQueryBundle(QUERY, instruction="x", llm_weight=0.25)
    assert instruction_of(bundle_with_instruction(own, "y").query_str) == "y"
    reset = bundle_with_instruction(own, None)  # None: the embedding's default, not the bundle's "x"
    assert reset.instruction is None and instruction_of(reset.query_str) is None and reset.llm_weight == 0.25
    assert bundle_with_instruction(own) is own  # nothing given: the bundle as it is
    plain = bundle_with_instruction(QueryBundle(InstructedText(QUERY, "z")), llm_weight=0.5)
    assert (plain.instruction, plain.llm_weight) == ("z", 0.5)  # what its string carries, and the call's knob
    with pytest.raises(InstEmbError, match="must be a string or a QueryBundle"):
        bundle_with_instruction(3)


def test_the_local_qdrant_store_runs_async_calls_on_its_one_client(tmp_path):
    pytest.importorskip("llama_index.vector_stores.qdrant")
    from llama_index.embeddings.instemb import qdrant_vector_store

    with qdrant_vector_store("docs", path=str(tmp_path / "qdrant")) as store:
        assert store.is_local
        assert asyncio.run(store._aclient.collection_exists("docs")) == store._client.collection_exists("docs")
