"""The shared-prefix K-instruction path (encode_instructions) of a two-tower encoder equals its
query LLM's encode_queries, anchored (the document sentence encoder's vector of instruction + query added
before normalising) or not."""

from __future__ import annotations

import numpy as np
import pytest

TEXT = "which tent is light and good in rain ?"
INSTRUCTIONS = [None, "focus on weight", "  ", "focus on durability", "focus on the packed size", "what is this"]


@pytest.fixture(params=["anchored", "plain"])
def two_tower(request, tiny_two_tower):
    if request.param == "plain":
        return tiny_two_tower
    return tiny_two_tower.with_anchor()


@pytest.mark.parametrize("batch_size", [2, 32])
def test_encode_instructions_equals_encode_queries(two_tower, batch_size):
    shared = two_tower.encode_instructions(TEXT, INSTRUCTIONS, batch_size=batch_size)
    expected = two_tower.encode_queries([TEXT] * len(INSTRUCTIONS), INSTRUCTIONS)
    assert shared.shape == (len(INSTRUCTIONS), two_tower.sentence_encoder.dimension)
    np.testing.assert_allclose(shared, expected, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(shared, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(shared[2], shared[0], atol=1e-6)  # a blank instruction is none


def test_the_anchor_is_the_towers_vector_of_instruction_and_query(tiny_two_tower):
    from instemb_rag.instructions import normalize_instruction
    from instemb_rag.teachers import teacher_text

    anchored = tiny_two_tower.with_anchor()
    assert anchored.fingerprint != tiny_two_tower.fingerprint
    assert anchored.document_fingerprint == tiny_two_tower.document_fingerprint  # the same stored vectors
    shared = anchored.encode_instructions(TEXT, INSTRUCTIONS)
    correction = tiny_two_tower.encode_unnormalised([TEXT] * len(INSTRUCTIONS), INSTRUCTIONS)
    anchors = tiny_two_tower.sentence_encoder.encode(
        [teacher_text(TEXT, normalize_instruction(instruction)) for instruction in INSTRUCTIONS]
    )
    combined = anchors + correction
    np.testing.assert_allclose(shared, combined / np.linalg.norm(combined, axis=1, keepdims=True), atol=1e-5)
    # Documents stay the sentence encoder's own, with no anchor.
    documents = ["the tent is durable nylon ."]
    np.testing.assert_allclose(
        anchored.encode_documents(documents), tiny_two_tower.sentence_encoder.encode(documents), atol=1e-6
    )
