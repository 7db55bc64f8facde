"""Fixtures for the integration's tests. The tiny random Llama comes from the project's
tests/testing.py, so both test suites build the same model."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

# The project's test helpers live beside its tests, not in the installed package: put that folder
# on the path (the whole suite has it already; this makes the integration's tests run alone too).
sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tests"))

from testing import build_tiny_model_folder, build_tiny_sentence_encoder_folder  # noqa: E402

# `instemb-rag query` (run by some tests beside LlamaIndex) answers in-process here: no test leaves
# a resident query process behind (tests/resident/ tests that one).
os.environ["INSTEMB_NO_DAEMON"] = "1"


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    return build_tiny_model_folder(tmp_path_factory.mktemp("tiny_llama_li"))


@pytest.fixture(scope="session")
def tiny_st_dir(tmp_path_factory) -> Path:
    """A tiny sentence-transformers folder (max_seq_length 32): a two-tower sentence encoder."""
    return build_tiny_sentence_encoder_folder(tmp_path_factory.mktemp("tiny_st_li"))


@pytest.fixture()
def tiny_two_tower(tiny_model_dir, tiny_st_dir):
    """A two-tower encoder: the tiny sentence encoder embeds documents, the tiny LLM (a random
    head into its 32-d space) embeds queries (as the project's tests/conftest.py builds it)."""
    import torch

    from instemb_rag import InstEmbEncoder
    from instemb_rag.encoder.modules.projection import Projection
    from instemb_rag.encoder.modules.sentence_encoder import SentenceEncoder

    encoder = InstEmbEncoder.from_pretrained(tiny_model_dir, device="cpu", lookahead_length=4, max_length=64)
    torch.manual_seed(0)
    sentence_encoder = SentenceEncoder.load(str(tiny_st_dir))
    from instemb_rag.encoder.composed.encoder import TwoTowerEncoder

    return TwoTowerEncoder(
        encoder.with_projection(Projection(encoder.hidden_size, sentence_encoder.dimension)), sentence_encoder
    )


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


@pytest.fixture(params=["faiss", "qdrant"])
def index_dir(request, tiny_embed_model, tiny_docs, tmp_path) -> Path:
    """An `instemb-rag index` folder of the tiny docs (one file each), on each vector store."""
    index_api = pytest.importorskip("instemb_rag.index", reason="instemb_rag.index is not available")
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for number, text in enumerate(tiny_docs):
        (corpus / f"doc{number}.txt").write_text(text)
    options = index_api.IndexOptions(
        index_dir=tmp_path / "index", stores=index_api.StoreOptions(store=request.param), model_label="tiny"
    )
    report = index_api.Indexer(tiny_embed_model.encoder, options).run(corpus)
    assert report.chunks_total == len(tiny_docs)
    return tmp_path / "index"
