import numpy as np
import pytest
import torch

from instemb_rag.encoder.modules.pooling import POOLING_MODES, Pooling, anchor_positions
from instemb_rag.encoder.modules.template import LOOKAHEAD_SLOT
from instemb_rag.errors import InstEmbError


def test_anchor_positions_right_and_left_padding():
    right = torch.tensor([[1, 1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1, 1]])
    left = torch.tensor([[0, 0, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1, 1]])
    last_r, la_r = anchor_positions(right, 2)
    last_l, la_l = anchor_positions(left, 2)
    assert last_r.tolist() == [2, 4] and la_r.tolist() == [[3, 4], [5, 6]]
    assert last_l.tolist() == [4, 4] and la_l.tolist() == [[5, 6], [5, 6]]


def test_pooling_modes_on_hand_made_states():
    hidden = torch.arange(5, dtype=torch.float32).repeat(1, 1).reshape(1, 5, 1).expand(1, 5, 2)
    mask = torch.ones(1, 5, dtype=torch.long)
    # positions: 0 1 2=last input 3 4 = look-ahead (L=2)
    expected = {"input_last": 2.0, "special_first": 3.0, "special_mean": 3.5, "all_mean": 3.0, "daap": 2.75}
    for mode in POOLING_MODES:
        assert Pooling(mode)(hidden, mask, 2)[0, 0].item() == pytest.approx(expected[mode])
    assert Pooling("daap")(hidden, mask, 0)[0, 0].item() == 4.0  # L=0: InputLast


def test_unknown_pooling_is_refused():
    with pytest.raises(ValueError, match="Choose one of"):
        Pooling("cls")


def test_truncation_keeps_instruction_and_lookahead(tiny_encoder):
    long_text = " ".join(["tent"] * 500)
    ids = tiny_encoder.build_ids(long_text, "focus on durability")
    tokenizer = tiny_encoder.tokenizer
    instruction_ids = tokenizer("focus on durability", add_special_tokens=False).input_ids
    assert len(ids) == tiny_encoder.max_length
    assert ids[-tiny_encoder.lookahead_length :] == [LOOKAHEAD_SLOT] * tiny_encoder.lookahead_length
    body = ids[: -tiny_encoder.lookahead_length]
    joined = " ".join(map(str, body))
    assert " ".join(map(str, instruction_ids)) in joined


def test_pieces_are_tokenized_separately(tiny_encoder):
    # The text/instruction boundary never merges: text ids are a prefix-independent block.
    tokenizer = tiny_encoder.tokenizer
    ids = tiny_encoder.build_ids("good tent", "focus on weight")
    text_ids = tokenizer("good tent", add_special_tokens=False).input_ids
    assert any(ids[i : i + len(text_ids)] == text_ids for i in range(len(ids)))


def test_instruction_too_long_gets_clear_error(tiny_encoder):
    with pytest.raises(InstEmbError, match="Shorten the instruction"):
        tiny_encoder.build_ids("tent", " ".join(["focus"] * 100))


def test_padding_side_does_not_change_embeddings(tiny_encoder):
    texts = ["good tent", "a durable light tent for rain and wind on a cold night"]
    ids = [tiny_encoder.build_ids(t, "focus on weight") for t in texts]
    with torch.no_grad():
        right = tiny_encoder(tiny_encoder.collate(ids, padding_side="right"))
        left = tiny_encoder(tiny_encoder.collate(ids, padding_side="left"))
    torch.testing.assert_close(right, left, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("mode", POOLING_MODES)
def test_batched_equals_one_by_one(tiny_model_dir, mode):
    from instemb_rag import InstEmbEncoder

    encoder = InstEmbEncoder.from_pretrained(tiny_model_dir, device="cpu", pooling=mode, lookahead_length=3)
    texts = ["tent", "a heavy stove with gas fuel and a good burner", "rain", "light nylon backpack strap"]
    instructions = ["focus on weight", None, "focus on durability", "what is it about"]
    batched = encoder.encode_queries(texts, instructions, batch_size=4)
    single = np.stack([encoder.encode_queries([t], [i], batch_size=1)[0] for t, i in zip(texts, instructions)])
    np.testing.assert_allclose(batched, single, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(batched, axis=1), 1.0, atol=1e-5)
    assert batched.dtype == np.float32


def test_instruction_count_mismatch_is_refused(tiny_encoder):
    with pytest.raises(InstEmbError, match="one instruction per text"):
        tiny_encoder.encode_queries(["a", "b"], ["x"])


def test_single_instruction_string_applies_to_all(tiny_encoder):
    texts = ["tent", "stove"]
    both = tiny_encoder.encode_queries(texts, "focus on weight")
    listed = tiny_encoder.encode_queries(texts, ["focus on weight", "focus on weight"])
    np.testing.assert_allclose(both, listed, atol=1e-6)
    assert not np.allclose(both, tiny_encoder.encode_queries(texts, None), atol=1e-4)
