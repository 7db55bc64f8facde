"""Two-tower encoders move as one (issue 50, "Fix on the way"): ``to`` takes the document tower along."""

from __future__ import annotations

import torch


def test_to_moves_the_document_tower_with_the_encoder(tiny_two_tower):
    def tower_parameters():
        return list(tiny_two_tower.document_tower.sentence_encoder.model.parameters())

    # A dtype change stays with the LLM: the sentence encoder keeps its own.
    assert tiny_two_tower.to(torch.float64) is tiny_two_tower
    assert {p.dtype for p in tower_parameters()} == {torch.float32}
    # A device move takes the tower along (the meta device needs no accelerator).
    assert tiny_two_tower.to("meta") is tiny_two_tower
    assert tiny_two_tower.device.type == "meta"
    assert {p.device.type for p in tower_parameters()} == {"meta"}
