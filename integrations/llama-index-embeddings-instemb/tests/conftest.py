"""Fixtures for the integration's tests. The tiny random Llama comes from the project's
tests/testing.py, so both test suites build the same model."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# The project's test helpers live beside its tests, not in the installed package: put that folder
# on the path (the whole suite has it already; this makes the integration's tests run alone too).
sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tests"))

from testing import build_tiny_model_folder  # noqa: E402


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    return build_tiny_model_folder(tmp_path_factory.mktemp("tiny_llama_li"))


@pytest.fixture()
def tiny_embed_model(tiny_model_dir):
    from instemb_rag import InstEmbEncoder
    from llama_index.embeddings.instemb import InstEmbEmbedding

    encoder = InstEmbEncoder.from_pretrained(tiny_model_dir, device="cpu", lookahead_length=4, max_length=64)
    return InstEmbEmbedding.from_encoder(encoder, query_instruction="focus on weight", embed_batch_size=4)


@pytest.fixture(scope="session")
def default_embed_model():
    """The real default model, loaded once (slow tests only)."""
    from llama_index.embeddings.instemb import InstEmbEmbedding

    return InstEmbEmbedding(device="cpu", embed_batch_size=8)


@pytest.fixture()
def tiny_docs() -> list[str]:
    """Short texts in the tiny model's word-level vocabulary (tests/conftest.py WORDS)."""
    return [
        "this tent is light and packed size is compact .",
        "this stove is heavy but the burner is durable .",
        "the backpack frame and strap are durable in rain and wind .",
        "a nylon tent with a pole and floor seam for cold night .",
        "the gas fuel stove is good for a camp trip .",
    ]
