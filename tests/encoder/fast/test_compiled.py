"""Opt-in torch.compile: the compiled-code cache sits under INSTEMB_HOME, keyed by what makes
compiled code reusable (torch version, device, dtype, precision, encoder fingerprint)."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

from instemb_rag import InstEmbEncoder
from instemb_rag.encoder.fast.compiled import CACHE_ENV, compile_cache_dir, compile_encoder, is_compiled


@pytest.fixture()
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("INSTEMB_HOME", str(tmp_path / "home"))
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "elsewhere"))  # restored after the test
    return tmp_path / "home"


def test_cache_folder_is_keyed_and_under_instemb_home(home, tiny_model_dir, tiny_encoder):
    folder = compile_cache_dir(tiny_encoder)
    assert folder.is_relative_to(home / "compile")
    assert folder.name == tiny_encoder.fingerprint
    assert torch.__version__.split("+")[0] in folder.parent.name and "cpu-float32" in folder.parent.name
    low = InstEmbEncoder.from_pretrained(
        tiny_model_dir, device="cpu", lookahead_length=4, max_length=64, precision="int8"
    )
    assert compile_cache_dir(low) != folder and compile_cache_dir(low).parent.name.endswith("-int8")
    other_length = InstEmbEncoder.from_pretrained(tiny_model_dir, device="cpu", lookahead_length=2, max_length=64)
    assert compile_cache_dir(other_length).name != folder.name  # another fingerprint, another folder


def test_compile_is_opt_in_and_points_inductor_at_the_cache(home, tiny_encoder):
    assert not is_compiled(tiny_encoder)
    folder = compile_encoder(tiny_encoder)
    assert is_compiled(tiny_encoder) and folder.is_dir()
    assert os.environ[CACHE_ENV] == str(folder)
    assert tiny_encoder.fingerprint == folder.name  # compiling changes no embedding identity


def test_compile_is_regional_one_graph_per_decoder_block(home, tiny_encoder):
    """Each decoder block is compiled (one traced graph reused by all), not the backbone as a whole,
    which would be traced again every process."""
    backbone = tiny_encoder.model.base_model
    compile_encoder(tiny_encoder)
    assert len(backbone.layers) > 1
    assert all(getattr(block, "_compiled_call_impl", None) is not None for block in backbone.layers)
    assert getattr(backbone, "_compiled_call_impl", None) is None


def test_compile_of_a_two_space_model_compiles_its_llm(home, tiny_model_dir, tiny_st_dir):
    """--compile on a two-space model (a two-space default included): its LLM's blocks, the cache
    keyed on the whole model's fingerprint."""
    pytest.importorskip("sentence_transformers")
    from instemb_rag.encoder.load import untrained_two_spaces

    mix = untrained_two_spaces(str(tiny_model_dir), str(tiny_st_dir), device="cpu", lookahead_length=2)
    assert not is_compiled(mix)
    folder = compile_encoder(mix)
    assert is_compiled(mix) and folder.name == mix.fingerprint and folder.is_relative_to(home / "compile")
    assert all(
        getattr(block, "_compiled_call_impl", None) is not None for block in mix.query_llm.model.base_model.layers
    )


@pytest.mark.skipif(
    os.environ.get("INSTEMB_TEST_COMPILE") != "1",
    reason="compiles C++ for minutes on a small CPU; set INSTEMB_TEST_COMPILE=1",
)
def test_compiled_encoder_matches_eager_and_fills_the_cache(home, tiny_model_dir, tiny_encoder):
    texts = ["the tent is light and durable", "which stove is good in cold wind ?", "packed size 10 cm"]
    eager = tiny_encoder.encode_queries(texts, [None, "focus on weight", None])
    compiled = InstEmbEncoder.from_pretrained(tiny_model_dir, device="cpu", lookahead_length=4, max_length=64)
    folder = compile_encoder(compiled)
    np.testing.assert_allclose(compiled.encode_queries(texts, [None, "focus on weight", None]), eager, atol=1e-4)
    assert any(folder.rglob("*")), "inductor wrote nothing into the cache folder"
