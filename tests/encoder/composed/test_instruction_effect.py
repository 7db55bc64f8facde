"""The instruction-effect arrangement (issue 56) on tiny models built here: the query is
[s h(D(q, i) - D(q, r)); M(i + q)], documents are the two-space layout, a query without an
instruction is the sentence encoder's alone, the strength is a query-time knob in no fingerprint,
and a saved folder loads back to the same vectors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from instemb_rag.encoder.composed.effect import (
    REFERENCE_INSTRUCTION,
    InstructionEffectEncoder,
    check_instruction_strength,
    effect_scale,
)
from instemb_rag.encoder.composed.effect_map import EffectMap
from instemb_rag.errors import InstEmbError

pytest.importorskip("sentence_transformers")

DOCS = ["the tent is durable nylon .", "a light tent of 1 kg .", "the stove burns gas ."]
QUERIES = ["which tent is light ?", "which tent lasts ?"]
INSTRUCTIONS = ["focus on weight", "focus on durability"]


@pytest.fixture(scope="module")
def effect(tiny_model_dir, tiny_st_dir):
    from instemb_rag.encoder.load import untrained_effect

    return untrained_effect(
        str(tiny_model_dir), str(tiny_st_dir), instruction_strength=2.0, device="cpu", lookahead_length=2
    )


def test_a_query_ranks_by_the_plain_score_plus_the_instructions_effect(effect):
    llm, sentence_encoder = effect.documents_by_space(DOCS)
    documents = effect.encode_documents(DOCS)
    queries = effect.encode_queries(QUERIES, INSTRUCTIONS)
    under = effect.query_llm.encode_queries(QUERIES, INSTRUCTIONS)
    reference = effect.query_llm.encode_queries(QUERIES, [REFERENCE_INSTRUCTION] * 2)
    plain = effect.sentence_encoder.anchor_vectors(QUERIES, INSTRUCTIONS)
    plain = plain / np.linalg.norm(plain, axis=1, keepdims=True)
    combined = plain @ sentence_encoder.T + 2.0 * (under - reference) @ llm.T
    np.testing.assert_allclose(np.linalg.norm(queries, axis=1), 1.0, atol=1e-5)
    effect_vector = 2.0 * (under - reference)
    np.testing.assert_allclose(queries @ documents.T, combined * effect_scale(effect_vector)[:, None], atol=1e-4)


def test_without_an_instruction_the_query_is_the_sentence_encoders_alone(effect):
    for instruction in (None, "   "):
        vector = effect.encode_queries(["which tent is light ?"], instruction)[0]
        sentence_encoder = effect.sentence_encoder.encode_documents(["which tent is light ?"])[0]
        np.testing.assert_allclose(vector[: effect.llm_dimension], 0.0)
        np.testing.assert_allclose(
            vector[effect.llm_dimension :], sentence_encoder / np.linalg.norm(sentence_encoder), atol=1e-5
        )


def test_the_reference_instruction_moves_nothing_and_strength_zero_is_plain_search(effect):
    vector = effect.encode_queries(["which tent ?"], REFERENCE_INSTRUCTION)[0]
    np.testing.assert_allclose(vector[: effect.llm_dimension], 0.0, atol=1e-5)
    zero = effect.encode_queries(QUERIES, INSTRUCTIONS, instruction_strength=0.0)
    np.testing.assert_allclose(zero[:, : effect.llm_dimension], 0.0)


def test_one_query_through_the_shared_prefix_equals_the_batched_pair(effect):
    one = effect.encode_queries(QUERIES[:1], INSTRUCTIONS[:1])
    batched = effect.encode_queries(QUERIES, INSTRUCTIONS)[:1]
    np.testing.assert_allclose(one, batched, atol=1e-4)


def test_the_strength_is_a_knob_outside_every_fingerprint(effect):
    stronger = effect.with_instruction_strength(3.0)
    assert stronger.fingerprint == effect.fingerprint
    assert not np.allclose(stronger.encode_queries(QUERIES, INSTRUCTIONS), effect.encode_queries(QUERIES, INSTRUCTIONS))
    assert effect.document_fingerprint != effect.fingerprint


def test_the_document_side_is_the_two_space_mixes(effect, tiny_model_dir, tiny_st_dir):
    from instemb_rag.encoder.load import untrained_two_spaces

    mix = untrained_two_spaces(str(tiny_model_dir), str(tiny_st_dir), device="cpu", lookahead_length=2)
    assert mix.document_fingerprint == effect.document_fingerprint
    np.testing.assert_allclose(mix.encode_documents(DOCS), effect.encode_documents(DOCS), atol=1e-6)


@pytest.mark.parametrize("bad", [-0.5, 11.0, float("nan"), "strong"])
def test_a_strength_out_of_range_is_refused_with_its_meaning(bad):
    with pytest.raises(InstEmbError, match="instruction_strength"):
        check_instruction_strength(bad)


def test_an_untrained_effect_map_is_the_identity_at_gain_one(effect):
    torch.manual_seed(0)
    effect_map = EffectMap(effect.llm_dimension, rank=4)
    under, reference = torch.randn(3, effect.llm_dimension), torch.randn(3, effect.llm_dimension)
    mapped, gain = effect_map(under, reference)
    torch.testing.assert_close(mapped, under - reference)
    torch.testing.assert_close(gain, torch.ones(3))


def test_a_saved_folder_loads_back_to_the_same_vectors(effect, tmp_path):
    from instemb_rag import InstEmbEncoder

    torch.manual_seed(0)
    effect_map = EffectMap(effect.llm_dimension, rank=4)
    with torch.no_grad():
        effect_map.up.weight.normal_(0, 0.1)
        effect_map.gain.weight.normal_(0, 0.1)
    trained = InstructionEffectEncoder(
        effect.documents_llm, effect.sentence_encoder, effect_map, 1.5, documents_source=effect.documents_source
    )
    trained.save(tmp_path / "effect")
    loaded = InstEmbEncoder.from_pretrained(tmp_path / "effect", device="cpu", lookahead_length=2)
    assert isinstance(loaded, InstructionEffectEncoder)
    assert loaded.fingerprint == trained.fingerprint and loaded.instruction_strength == 1.5
    np.testing.assert_allclose(
        loaded.encode_queries(QUERIES, INSTRUCTIONS), trained.encode_queries(QUERIES, INSTRUCTIONS), atol=1e-5
    )
    np.testing.assert_allclose(loaded.encode_documents(DOCS), trained.encode_documents(DOCS), atol=1e-5)


def test_explain_splits_each_score_into_plain_and_instruction(effect):
    rows = effect.explain(QUERIES[0], INSTRUCTIONS[0], DOCS)
    scores = effect.encode_queries(QUERIES[:1], INSTRUCTIONS[:1]) @ effect.encode_documents(DOCS).T
    for row, score in zip(rows, scores[0]):
        assert row["combined"] == pytest.approx(row["plain"] + row["instruction"])
        assert row["score"] == pytest.approx(float(score), abs=1e-4)
        assert row["instruction_strength"] == pytest.approx(2.0)
