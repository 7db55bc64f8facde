"""The projection head (encoder/modules/projection.py): a blend keeps the pooled embedding's cosine in a
fixed share, saves and loads with its weight, and leaves unblended heads' configs as they were."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from instemb_rag.encoder.modules.projection import Projection
from instemb_rag.errors import CheckpointError


def _head(seed: int = 0) -> Projection:
    torch.manual_seed(seed)
    return Projection(16, 8)


def _cos(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return F.cosine_similarity(a, b, dim=-1)


@pytest.mark.parametrize("weight", [0.25, 0.6])
def test_blended_cosine_is_the_weighted_sum_of_the_two_cosines(weight):
    head = _head()
    blend = head.with_input_weight(weight)
    x, y = torch.randn(5, 16), torch.randn(5, 16)
    expected = weight * _cos(x, y) + (1 - weight) * _cos(head(x), head(y))
    assert blend.dimension == 24 and blend(x).shape == (5, 24)
    assert torch.allclose(_cos(blend(x), blend(y)), expected, atol=1e-5)
    # A view shares the trained weights; training's map is the head alone.
    assert blend.linear is head.linear
    assert torch.equal(blend.teacher_space(x), head(x))


def test_blend_saves_and_loads_with_its_weight(tmp_path):
    blend = _head().with_input_weight(0.4)
    blend.save(tmp_path)
    loaded = Projection.load(tmp_path, blend.get_config_dict())
    x = torch.randn(3, 16)
    assert loaded.input_weight == 0.4 and torch.allclose(loaded(x), blend(x))


def test_unblended_config_has_no_weight_key_and_bad_weights_are_refused():
    # Heads saved before blends existed keep their config, hence their fingerprint.
    assert "input_weight" not in _head().get_config_dict()
    for bad in (-0.1, 1.0):
        with pytest.raises(CheckpointError, match="input_weight"):
            _head().with_input_weight(bad)
