"""Shared fixtures. Tiny random Llama models are built here, inside the tests, for speed;
tests marked `slow` use the real default model (SmolLM2-135M-Instruct)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from testing import (  # noqa: F401
    WORDS,
    build_tiny_model_folder,
    build_tiny_sentence_encoder_folder,
    minilm_or_skip,
    shared_data_or_skip,
)

# `instemb-rag query` answers through a resident process by default (instemb_rag/resident/): the
# suite runs queries in-process, so no test leaves a process behind; tests/resident/ starts and
# stops its own, under an INSTEMB_HOME of its own.
os.environ["INSTEMB_NO_DAEMON"] = "1"


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    return build_tiny_model_folder(tmp_path_factory.mktemp("tiny_llama"))


@pytest.fixture()
def tiny_encoder(tiny_model_dir):
    from instemb_rag import InstEmbEncoder

    return InstEmbEncoder.from_pretrained(tiny_model_dir, device="cpu", lookahead_length=4, max_length=64)


@pytest.fixture(scope="session")
def tiny_st_dir(tmp_path_factory) -> Path:
    """(Teachers, and two-tower sentence encoders.) A saved sentence-transformers folder: 1-layer BERT (hidden 32) + mean pooling + Normalize."""
    return build_tiny_sentence_encoder_folder(tmp_path_factory.mktemp("tiny_st"))


@pytest.fixture()
def tiny_two_tower(tiny_encoder, tiny_st_dir):
    """A two-tower encoder: the tiny sentence encoder embeds documents, the tiny LLM (a random
    head into the sentence encoder's 32-d space) embeds queries."""
    import torch

    from instemb_rag.encoder.composed.encoder import TwoTowerEncoder
    from instemb_rag.encoder.modules.projection import Projection
    from instemb_rag.encoder.modules.sentence_encoder import SentenceEncoder

    torch.manual_seed(0)
    sentence_encoder = SentenceEncoder.load(str(tiny_st_dir))
    head = Projection(tiny_encoder.hidden_size, sentence_encoder.dimension)
    return TwoTowerEncoder(tiny_encoder.with_projection(head), sentence_encoder)


@pytest.fixture(scope="session")
def default_encoder():
    """The shipped symmetric LLM (slow tests only): what tests of the LLM itself load (int8, shared
    prefix, look-ahead, its embeddings since issue 45), whichever layout the default has: the
    default checkpoint, or the documents' LLM of a two-space default (``shipped_llm_folder``).
    A test of the shipped model as a whole takes ``default_model``."""
    from instemb_rag import InstEmbEncoder
    from instemb_rag.encoder import shipped_llm_folder

    return InstEmbEncoder.from_pretrained(shipped_llm_folder(), device="cpu")


@pytest.fixture(scope="session")
def default_model(request):
    """The shipped default model as a whole, as ``InstEmbEncoder.from_pretrained()`` loads it (slow
    tests only): a symmetric encoder (then the very ``default_encoder``, not loaded twice) or a
    two-space one (documents [LLM; MiniLM], which needs minilm installed)."""
    from instemb_rag import InstEmbEncoder
    from instemb_rag.encoder.model import SHIPPED_MODEL_FOLDER, shipped_llm_folder

    if shipped_llm_folder() == SHIPPED_MODEL_FOLDER:
        return request.getfixturevalue("default_encoder")
    return InstEmbEncoder.from_pretrained(device="cpu")


@pytest.fixture(scope="session")
def composed_default_dir(tmp_path_factory) -> Path:
    """A two-space default as issue 50 would ship it, built here (slow tests only): `instemb-rag
    compose` of the shipped LLM (``shipped_llm_folder``, copied byte for byte as documents_llm/)
    and the installed minilm. Skips where minilm is not installed."""
    from typer.testing import CliRunner

    from instemb_rag.cli import app

    minilm_or_skip()
    folder = tmp_path_factory.mktemp("two_space_default") / "default_checkpoint"
    result = CliRunner().invoke(app, ["compose", "--out", str(folder), "--llm-weight", "0.7"])
    assert result.exit_code == 0, result.output
    return folder


# The int8 kernels a test taking ``int8_kernel_kind`` runs with: this machine's own, then each
# kind the code knows that can multiply (``none``, no quantized engine, is tested by its refusal).
INT8_KERNEL_RUNS = ("host", "vnni", "arm", "int16-pairs")


@pytest.fixture(params=INT8_KERNEL_RUNS)
def int8_kernel_kind(request, monkeypatch) -> str:
    """The int8 kernel kind the test runs with (its name is returned): "host" is this machine's
    real one; the others monkeypatch the kernel probe (``cpu_flags.int8_kernel``), so the bit
    widths, plan key and reports are that kind's while the host's kernel does the arithmetic. A kind
    whose bit widths the host's kernel cannot multiply exactly (8-bit x 8-bit on an int16-pairs
    kernel) is skipped: it would measure the host's saturation, not that kind. No test may assume
    which kind the CI machine has."""
    from instemb_rag.encoder import cpu_flags, quantize

    monkeypatch.delenv(cpu_flags.FLAGS_ENV, raising=False)  # the real CPU, not a configured one
    host = cpu_flags.int8_kernel()
    if host == "none":
        pytest.skip("this torch build has no quantized engine: no int8 kernel runs here")
    kind = host if request.param == "host" else request.param
    if quantize.saturates(*quantize.int8_bits(kind), host):
        pytest.skip(
            f"the {kind} kernel's bit widths {quantize.int8_bits(kind)} saturate this machine's {host} kernel; "
            "a machine with VNNI or ARM runs this case"
        )
    if request.param != "host":
        monkeypatch.setattr(cpu_flags, "int8_kernel", lambda: kind)
    return kind


@pytest.fixture()
def shared_data_dir_or_skip() -> Path:
    """The development data root (../shared/data); skips where it is absent."""
    from testing import shared_data_dir

    folder = shared_data_dir()
    if not folder.is_dir():
        pytest.skip(f"{folder} is absent (development data lives in ../shared/data beside the checkout)")
    return folder
