"""The packed shared-prefix pass (fast/shared_prefix.py): one text under K instructions runs as one
row, prefix + K suffixes, in one forward pass per ``batch_size`` suffixes, each suffix attending to
the prefix and to itself only. (Its vectors equal the plain path's: test_shared_prefix.py.)"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from instemb_rag.encoder.fast.shared_prefix import attention_is_full, packed_row

TEXT = "the tent is light and durable in rain and wind . the frame uses poles and a nylon floor"
INSTRUCTIONS = ["focus on weight", "durability", "what is the packed size of the tent in cm ?"]


def count_passes(encoder, monkeypatch) -> list[int]:
    """Token counts of each forward pass of the decoder stack."""
    passes, forward = [], type(encoder.model.base_model).forward

    def counted(module, *args, **kwargs):
        passes.append(kwargs["inputs_embeds"].shape[0] * kwargs["inputs_embeds"].shape[1])
        return forward(module, *args, **kwargs)

    monkeypatch.setattr(type(encoder.model.base_model), "forward", counted)
    return passes


@pytest.mark.parametrize(("batch_size", "expected_passes"), [(32, 1), (2, 2)])
def test_one_pass_per_batch_of_suffixes_with_no_padding(tiny_encoder, monkeypatch, batch_size, expected_passes):
    id_lists = [tiny_encoder.build_ids(TEXT, instruction) for instruction in INSTRUCTIONS]
    passes = count_passes(tiny_encoder, monkeypatch)
    tiny_encoder.encode_instructions(TEXT, INSTRUCTIONS, batch_size=batch_size)
    assert len(passes) == expected_passes
    if expected_passes == 1:  # the text once, each instruction's suffix once, nothing padded
        shared = min(len(ids) for ids in id_lists) - tiny_encoder.lookahead_length - 1
        shared = min(shared, next(n for n, ids in enumerate(zip(*id_lists)) if len(set(ids)) > 1))
        assert passes == [shared + sum(len(ids) - shared for ids in id_lists)]


def test_a_suffix_reads_the_prefix_and_itself_only():
    positions, attention = packed_row([1, 2, 3], [[4, 5], [6, 7, 8]])
    assert positions.tolist() == [0, 1, 2, 3, 4, 3, 4, 5]
    expected = np.array(
        [
            [1, 0, 0, 0, 0, 0, 0, 0],
            [1, 1, 0, 0, 0, 0, 0, 0],
            [1, 1, 1, 0, 0, 0, 0, 0],
            [1, 1, 1, 1, 0, 0, 0, 0],  # first suffix
            [1, 1, 1, 1, 1, 0, 0, 0],
            [1, 1, 1, 0, 0, 1, 0, 0],  # second suffix: not the first
            [1, 1, 1, 0, 0, 1, 1, 0],
            [1, 1, 1, 0, 0, 1, 1, 1],
        ],
        dtype=bool,
    )
    assert torch.equal(attention, torch.from_numpy(expected))


def test_sliding_window_models_take_the_plain_path():
    from transformers import LlamaConfig, MistralConfig

    assert attention_is_full(LlamaConfig(num_hidden_layers=2))
    assert not attention_is_full(MistralConfig(num_hidden_layers=2, sliding_window=4))
