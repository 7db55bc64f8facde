"""Encoder settings are frozen; ``with_options`` gives another encoder over the same weights;
what a checkpoint stores is named in its config, never inferred from requires_grad."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import torch

from instemb_rag import InstEmbEncoder
from instemb_rag.encoder.llm_folder import read_config

TEXTS = ["a durable tent for rain", "light stove"]
INSTRUCTIONS = ["focus on durability", None]
PACKAGE = Path(__file__).resolve().parents[1] / "instemb_rag"


@pytest.mark.parametrize("name", ["pooling", "lookahead_length", "max_length", "precision", "settings"])
def test_settings_cannot_be_swapped(tiny_encoder, name):
    with pytest.raises(AttributeError):
        setattr(tiny_encoder, name, getattr(tiny_encoder, name))
    with pytest.raises(AttributeError):
        tiny_encoder.settings.max_length = 32  # frozen dataclass


def test_with_options_shares_weights_and_equals_a_fresh_load(tiny_encoder, tmp_path):
    view = tiny_encoder.with_options(pooling="input_last", lookahead_length=2, max_length=32)
    assert view.model is tiny_encoder.model and view.lookahead is tiny_encoder.lookahead
    assert (view.pooling.mode, view.lookahead_length, view.max_length) == ("input_last", 2, 32)
    assert (tiny_encoder.pooling.mode, tiny_encoder.lookahead_length, tiny_encoder.max_length) == ("daap", 4, 64)
    tiny_encoder.save(tmp_path / "ckpt")
    fresh = InstEmbEncoder.from_pretrained(
        tmp_path / "ckpt", device="cpu", pooling="input_last", lookahead_length=2, max_length=32
    )
    assert view.fingerprint == fresh.fingerprint != tiny_encoder.fingerprint
    np.testing.assert_array_equal(view.encode_queries(TEXTS, INSTRUCTIONS), fresh.encode_queries(TEXTS, INSTRUCTIONS))
    assert tiny_encoder.with_options() is tiny_encoder
    with pytest.raises(Exception, match="between 0 and"):
        tiny_encoder.with_options(lookahead_length=5)


def test_a_fresh_encoder_saves_no_backbone_tensor(tiny_encoder, tmp_path):
    """Every parameter of a freshly loaded model has requires_grad; none of them was trained."""
    assert all(param.requires_grad for param in tiny_encoder.model.parameters())
    tiny_encoder.save(tmp_path / "fresh")
    assert not (tmp_path / "fresh" / "adapted.safetensors").exists()
    assert read_config(tmp_path / "fresh").trained == []


def test_trained_names_are_recorded_and_saved_again(tiny_encoder, tmp_path):
    name = "model.norm.weight"
    with torch.no_grad():
        dict(tiny_encoder.model.named_parameters())[name].mul_(1.5)
    tiny_encoder.save(tmp_path / "first", trained=[name])
    assert read_config(tmp_path / "first").trained == [name]
    loaded = InstEmbEncoder.from_pretrained(tmp_path / "first", device="cpu")
    assert loaded.trained_names == (name,)
    loaded.save(tmp_path / "second")  # re-saving a loaded checkpoint keeps what it had learned
    again = InstEmbEncoder.from_pretrained(tmp_path / "second", device="cpu")
    assert again.fingerprint == loaded.fingerprint == tiny_encoder.fingerprint
    np.testing.assert_array_equal(
        again.encode_queries(TEXTS, INSTRUCTIONS), tiny_encoder.encode_queries(TEXTS, INSTRUCTIONS)
    )


def test_inference_modules_import_nothing_from_training_or_tools():
    """Loading and embedding never pull in the training package or the report tooling."""
    runtime = [
        path
        for path in PACKAGE.rglob("*.py")
        if not {"training", "tools", "cli"} & set(path.relative_to(PACKAGE).parts)
    ]
    offenders = []
    for path in runtime:
        text = path.read_text()
        if re.search(r"from \.+training\b|instemb_rag\.training\b|from \.+tools\b|instemb_rag\.tools\b", text):
            offenders.append(str(path.relative_to(PACKAGE)))
    # eval/ reads training records and builders for its held-out sets (data, not the trainer).
    assert sorted(o for o in offenders if not o.startswith("eval/")) == []
