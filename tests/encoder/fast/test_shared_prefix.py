"""The shared-prefix path must give the plain path's embeddings (one text, K instructions)."""

from __future__ import annotations

import numpy as np
import pytest

from instemb_rag.encoder.fast.shared_prefix import common_prefix_length, shared_prefix_length
from instemb_rag.errors import InstEmbError

TEXT = "the tent is light and durable in rain and wind . the frame uses poles and a nylon floor"
INSTRUCTIONS = [
    "focus on weight",
    None,
    "what is the packed size of the tent in cm ?",
    "durability",
    "how does it do in cold night camp with wind and rain and poor weather ?",
]


def plain(encoder, text, instructions):
    return encoder.encode_queries([text] * len(instructions), instructions)


@pytest.mark.parametrize("count", [2, 3, 5])
def test_matches_plain_path_for_several_k(tiny_encoder, count):
    instructions = INSTRUCTIONS[:count]
    shared = tiny_encoder.encode_instructions(TEXT, instructions)
    assert shared.shape == (count, tiny_encoder.dimension)
    np.testing.assert_allclose(shared, plain(tiny_encoder, TEXT, instructions), atol=1e-4)


def test_embeddings_differ_per_instruction(tiny_encoder):
    # Guards against a path that returns one row repeated (e.g. pooling the prefix only).
    shared = tiny_encoder.encode_instructions(TEXT, INSTRUCTIONS)
    distances = np.linalg.norm(shared[:, None] - shared[None, :], axis=-1)
    assert (distances[~np.eye(len(INSTRUCTIONS), dtype=bool)] > 1e-3).all()


def test_small_batches_reuse_the_prefix(tiny_encoder):
    shared = tiny_encoder.encode_instructions(TEXT, INSTRUCTIONS, batch_size=2)
    np.testing.assert_allclose(shared, plain(tiny_encoder, TEXT, INSTRUCTIONS), atol=1e-4)


def test_truncated_text_still_matches(tiny_encoder):
    # max_length=64 in the fixture: the text is cut differently per instruction length,
    # so only part of it is shared; results must still equal the plain path.
    long_text = " ".join([TEXT] * 6)
    ids = [tiny_encoder.build_ids(long_text, instruction) for instruction in INSTRUCTIONS]
    assert len({len(row) for row in ids}) == 1  # all hit max_length: truncation happened
    shared = tiny_encoder.encode_instructions(long_text, INSTRUCTIONS)
    np.testing.assert_allclose(shared, plain(tiny_encoder, long_text, INSTRUCTIONS), atol=1e-4)


def test_without_lookahead_tokens(tiny_model_dir):
    from instemb_rag import InstEmbEncoder

    encoder = InstEmbEncoder.from_pretrained(tiny_model_dir, device="cpu", lookahead_length=0, max_length=64)
    shared = encoder.encode_instructions(TEXT, INSTRUCTIONS)
    np.testing.assert_allclose(shared, plain(encoder, TEXT, INSTRUCTIONS), atol=1e-4)


def test_all_none_and_single_instruction(tiny_encoder):
    np.testing.assert_allclose(
        tiny_encoder.encode_instructions(TEXT, [None, None]), plain(tiny_encoder, TEXT, [None, None]), atol=1e-4
    )
    np.testing.assert_allclose(
        tiny_encoder.encode_instructions(TEXT, ["durability"]), plain(tiny_encoder, TEXT, ["durability"]), atol=1e-4
    )
    assert tiny_encoder.encode_instructions(TEXT, []).shape == (0, tiny_encoder.dimension)


def test_bad_input_is_refused(tiny_encoder):
    with pytest.raises(InstEmbError, match="list of instructions"):
        tiny_encoder.encode_instructions(TEXT, "durability")
    with pytest.raises(InstEmbError, match="not a string"):
        tiny_encoder.encode_instructions(None, ["durability"])


def test_prefix_length_keeps_the_anchor_in_every_suffix():
    rows = [[1, 2, 3, 4, -1, -1], [1, 2, 3, 9, 8, -1, -1]]
    assert common_prefix_length(rows) == 3
    assert shared_prefix_length(rows, lookahead_length=2) == 3
    # Identical rows: the last input token (before the 2 slots) must stay outside the prefix.
    same = [[1, 2, 3, 4, -1, -1]] * 2
    assert shared_prefix_length(same, lookahead_length=2) == 3


@pytest.mark.slow
def test_default_model_matches_plain_path(default_encoder):
    text = "The tent weighs 1.9 kg, packs small and kept us dry through two nights of rain."
    instructions = ["Focus on weight.", None, "Does it stay dry in heavy rain and strong wind?"]
    shared = default_encoder.encode_instructions(text, instructions)
    np.testing.assert_allclose(shared, plain(default_encoder, text, instructions), atol=1e-4)
