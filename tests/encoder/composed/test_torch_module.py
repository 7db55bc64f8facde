"""A composed encoder is a torch module (issue 62 item 4): its LLM and module parts are registered
submodules, so train/eval/to/parameters/state_dict are torch's; the sentence encoder (no torch
module, frozen) follows the query LLM's device and keeps its own mode; the vectors do not change."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from instemb_rag.encoder.composed.encoder import TwoSpacesEncoder
from instemb_rag.encoder.composed.gate import WeightGate
from instemb_rag.encoder.modules.projection import Projection

pytest.importorskip("sentence_transformers")

QUERIES = ["which tent is light ?", "which tent lasts ?"]
INSTRUCTIONS = ["focus on weight", "focus on durability"]


@pytest.fixture
def mixed(tiny_model_dir, tiny_st_dir) -> TwoSpacesEncoder:
    """A two-space encoder with a query LLM of its own, a sentence encoder head and a gate: every kind of part."""
    from instemb_rag.encoder.load import load_model, untrained_two_spaces

    mix = untrained_two_spaces(str(tiny_model_dir), str(tiny_st_dir), device="cpu", lookahead_length=2)
    query_llm = load_model(str(tiny_model_dir), device="cpu", lookahead_length=2)
    torch.manual_seed(0)
    head = Projection(query_llm.hidden_size, mix.sentence_encoder.dimension)
    gate = WeightGate(query_llm.hidden_size)
    return TwoSpacesEncoder(mix.documents_llm, mix.sentence_encoder, query_llm, head, gate).eval()


def test_its_parameters_are_every_torch_part_once_and_not_the_sentence_encoders(mixed):
    assert isinstance(mixed, nn.Module)
    expected = {
        id(parameter)
        for part in (mixed.documents_llm, mixed.query_llm, mixed.sentence_encoder_head, mixed.gate)
        for parameter in part.parameters()
    }
    found = [id(parameter) for parameter in mixed.parameters()]
    assert len(found) == len(set(found)) and set(found) == expected
    tower_parameters = {id(parameter) for parameter in mixed.sentence_encoder.teacher.model.parameters()}
    assert tower_parameters and not tower_parameters & expected


def test_its_state_dict_is_each_part_under_its_name(mixed):
    state = mixed.state_dict()
    for name in ("documents_llm", "query_llm", "sentence_encoder_head", "gate"):
        own = mixed.parts[name].state_dict()
        assert own and all(torch.equal(state[f"torch_parts.{name}.{key}"], value) for key, value in own.items())
    assert {key.split(".")[1] for key in state} == {"documents_llm", "query_llm", "sentence_encoder_head", "gate"}


def test_train_and_eval_reach_every_torch_part_and_leave_the_sentence_encoder_frozen(mixed):
    before = mixed.encode_queries(QUERIES, INSTRUCTIONS)
    tower_model = mixed.sentence_encoder.teacher.model
    assert mixed.train() is mixed
    assert all(module.training for module in mixed.modules())
    assert not tower_model.training
    assert mixed.eval() is mixed
    assert not any(module.training for module in mixed.modules())
    np.testing.assert_allclose(mixed.encode_queries(QUERIES, INSTRUCTIONS), before, atol=1e-6)


def test_train_takes_the_fingerprint_afresh(mixed):
    before = mixed.fingerprint
    with torch.no_grad():
        mixed.gate.linear.weight.add_(1.0)  # a training step would change the weights
    assert mixed.fingerprint == before  # cached
    mixed.train().eval()
    assert mixed.fingerprint != before


def test_to_moves_the_sentence_encoder_with_the_query_llm_in_its_own_dtype(mixed):
    # "meta" needs no accelerator: every torch part goes there, the sentence encoder follows.
    tower_dtype = next(mixed.sentence_encoder.teacher.model.parameters()).dtype
    assert mixed.to("meta") is mixed
    assert mixed.device == torch.device("meta")
    assert all(parameter.device.type == "meta" for parameter in mixed.parameters())
    assert all(p.device.type == "meta" for p in mixed.sentence_encoder.teacher.model.parameters())
    mixed.to(torch.float64)
    assert all(parameter.dtype == torch.float64 for parameter in mixed.parameters())
    assert next(mixed.sentence_encoder.teacher.model.parameters()).dtype == tower_dtype
