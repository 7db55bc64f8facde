"""The generate-then-embed baseline really generates (fixed length, greedy) and embeds that."""

from __future__ import annotations

import numpy as np

from instemb_rag.encoder.modules.template import LOOKAHEAD_SLOT
from tools.baselines import GenerateThenEmbed, GenerateThenEmbedArgs


def test_prompt_has_no_lookahead_slots(tiny_encoder):
    baseline = GenerateThenEmbed(tiny_encoder)
    ids = baseline.prompt_ids("the tent is light", "focus on weight")
    assert LOOKAHEAD_SLOT not in ids
    assert ids == tiny_encoder.build_ids("the tent is light", "focus on weight")[: -tiny_encoder.lookahead_length]


def test_answers_are_greedy_and_embedded(tiny_encoder):
    baseline = GenerateThenEmbed(tiny_encoder, GenerateThenEmbedArgs(max_new_tokens=6, batch_size=2))
    texts = ["the tent is light", "the stove is heavy and the fuel is gas"]
    instructions = ["focus on weight", None]
    answers = baseline.generate_answers(texts, instructions)
    assert answers == baseline.generate_answers(texts, instructions)  # greedy: deterministic
    # Left-padded batch gives each row the answer it gets alone (positions follow the mask).
    assert answers[1] == baseline.generate_answers(texts[1:], instructions[1:])[0]
    embeddings = baseline.encode(texts, instructions)
    assert embeddings.shape == (2, tiny_encoder.dimension)
    np.testing.assert_allclose(embeddings, tiny_encoder.encode_documents(answers), atol=1e-5)
