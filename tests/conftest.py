"""Shared fixtures. Tiny random Llama models are built here, inside the tests, for speed;
tests marked `slow` use the real default model (SmolLM2-135M-Instruct)."""

from __future__ import annotations

from pathlib import Path

import pytest
from testing import build_tiny_model_folder, shared_data_or_skip  # noqa: F401


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    return build_tiny_model_folder(tmp_path_factory.mktemp("tiny_llama"))


@pytest.fixture()
def tiny_encoder(tiny_model_dir):
    from instemb_rag import InstEmbEncoder

    return InstEmbEncoder.from_pretrained(tiny_model_dir, device="cpu", lookahead_length=4, max_length=64)


@pytest.fixture(scope="session")
def default_encoder():
    """The real default model (slow tests only)."""
    from instemb_rag import InstEmbEncoder

    return InstEmbEncoder.from_pretrained(device="cpu")


@pytest.fixture()
def shared_data_dir_or_skip() -> Path:
    """The development data root (../shared/data); skips where it is absent."""
    from testing import shared_data_dir

    folder = shared_data_dir()
    if not folder.is_dir():
        pytest.skip(f"{folder} is absent (development data lives in ../shared/data beside the checkout)")
    return folder
