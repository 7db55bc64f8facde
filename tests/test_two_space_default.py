"""The shipped default may be a symmetric checkpoint or a two-space folder (issue 50): shipping one
is replacing the contents of instemb_rag/default_checkpoint, its documents_llm/ being the symmetric
LLM that shipped before. ``shipped_llm_folder()`` names that LLM in either layout, and what
means the LLM goes through it (the untrained mix, a training start, the trainer's "default"); the
default as a whole (``from_pretrained()``) is the two-space model, and with minilm missing it fails
with the install command, never falling back to one space.

The tiny models of tests/testing.py stand in for the layouts here; the last test composes the real
shipped LLM with minilm (slow, where minilm is installed)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import instemb_rag.encoder.model as model
from instemb_rag import InstEmbEncoder
from instemb_rag.cli import app
from instemb_rag.encoder import shipped_llm_folder
from instemb_rag.encoder.composed import PARTS_FILE, llm_folder_of
from instemb_rag.encoder.composed.config import DOCUMENTS_LLM_DIR

pytest.importorskip("sentence_transformers")

TEXTS = ["the tent is durable nylon . good in rain .", "a light tent . packed size 30 cm ."]


@pytest.fixture()
def symmetric_default(tiny_encoder, tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "symmetric_default"
    tiny_encoder.save(folder)
    monkeypatch.setattr(model, "SHIPPED_MODEL_FOLDER", folder)
    return folder


@pytest.fixture()
def two_space_default(tiny_model_dir, tiny_st_dir, tmp_path, monkeypatch) -> Path:
    """A two-space default over the tiny LLM (as a checkpoint: documents_llm/) and the tiny sentence encoder."""
    from instemb_rag.encoder.load import untrained_two_spaces

    folder = tmp_path / "two_space_default"
    untrained_two_spaces(str(tiny_model_dir), str(tiny_st_dir), llm_weight=0.6, device="cpu", lookahead_length=2).save(
        folder
    )
    monkeypatch.setattr(model, "SHIPPED_MODEL_FOLDER", folder)
    return folder


def test_the_shipped_llm_of_a_symmetric_default_is_the_default_itself(symmetric_default, tiny_encoder):
    assert shipped_llm_folder() == symmetric_default == llm_folder_of(symmetric_default)
    assert InstEmbEncoder.from_pretrained(device="cpu").fingerprint == tiny_encoder.fingerprint


def test_the_shipped_llm_of_a_two_space_default_is_its_documents_llm(two_space_default, tiny_st_dir):
    from instemb_rag.encoder.composed.encoder import TwoSpacesEncoder
    from instemb_rag.encoder.load import untrained_two_spaces

    llm_folder = two_space_default / DOCUMENTS_LLM_DIR
    assert shipped_llm_folder() == llm_folder
    assert llm_folder_of(str(two_space_default)) == str(llm_folder)  # a string stays a string
    llm = InstEmbEncoder.from_pretrained(llm_folder, device="cpu")

    default = InstEmbEncoder.from_pretrained(device="cpu")  # the default as a whole
    assert isinstance(default, TwoSpacesEncoder) and default.llm_weight == 0.6
    assert default.documents_llm.fingerprint == llm.fingerprint
    np.testing.assert_allclose(
        default.encode_documents(TEXTS)[:, : llm.dimension] * math.sqrt(2), llm.encode_documents(TEXTS), atol=1e-5
    )

    mix = untrained_two_spaces(None, str(tiny_st_dir), device="cpu")  # None: the shipped LLM, not the whole default
    assert mix.documents_llm.fingerprint == llm.fingerprint and mix.documents_source == llm_folder
    nested = untrained_two_spaces(str(two_space_default), str(tiny_st_dir), device="cpu")  # a two-space folder: its LLM
    assert nested.documents_llm.fingerprint == llm.fingerprint


def test_training_on_from_a_two_space_folder_starts_from_its_documents_llm(two_space_default):
    """The recipes name instemb_rag/default_checkpoint: once that is two-space, a run trains on from
    its documents' LLM (look-ahead vectors, adapted tensors), and --dry-run sizes that LLM."""
    import torch

    from instemb_rag.training.args import load_config
    from instemb_rag.training.continuation import starting_llm_folder, starting_point
    from instemb_rag.training.sizing import dry_run_report
    from instemb_rag.training.student import load_student

    llm_folder = two_space_default / DOCUMENTS_LLM_DIR
    config = load_config(
        "instemb_rag/training/recipes/two-spaces.yaml",
        {"model.model_name_or_path": str(two_space_default), "model.lookahead_length": 2},
    )
    assert starting_point(config.model) == str(llm_folder)
    assert starting_llm_folder(starting_point(config.model)).folder == llm_folder
    student = load_student(config, torch.device("cpu"))
    llm = InstEmbEncoder.from_pretrained(llm_folder, device="cpu")
    torch.testing.assert_close(student.lookahead.vectors, llm.lookahead.vectors)
    assert student.backbone.fingerprint == llm.backbone.fingerprint
    assert "layers" in dry_run_report(config)

    symmetric = load_config(None, {"model.model_name_or_path": str(llm_folder)})
    assert starting_point(symmetric.model) == str(llm_folder)  # a symmetric checkpoint: itself


def test_a_two_space_default_without_minilm_fails_with_the_install_command(two_space_default, tmp_path, monkeypatch):
    """A missing part is an error, never a silent fallback to one space: the library and the CLI
    name the command that installs it."""
    from instemb_rag.errors import ModelNotFoundError
    from instemb_rag.teachers import registry

    parts = json.loads((two_space_default / PARTS_FILE).read_text())
    parts["parts"]["sentence_encoder"]["config"]["encoder"] = "minilm"  # as a shipped two-space default names it
    (two_space_default / PARTS_FILE).write_text(json.dumps(parts))
    monkeypatch.setattr(registry, "teachers_root", lambda: tmp_path / "no-teachers")
    with pytest.raises(
        ModelNotFoundError, match=r"'minilm' is not installed: run `instemb-rag teachers install minilm`"
    ):
        InstEmbEncoder.from_pretrained(device="cpu")

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text(TEXTS[0])
    result = CliRunner().invoke(app, ["index", str(docs), "--index-dir", str(tmp_path / "index"), "--no-progress"])
    assert result.exit_code == 5, result.output
    assert "instemb-rag teachers install minilm" in " ".join(result.output.split())


@pytest.mark.slow
def test_the_real_shipped_llm_composed_as_the_default(composed_default_dir, default_encoder, monkeypatch):
    """`instemb-rag compose` of the shipped LLM and minilm, put in place of default_checkpoint: its
    documents_llm/ holds the shipped LLM's files byte for byte, the default loads as the two-space
    model, its LLM half is the shipped LLM's, and the shipped LLM still names that LLM."""
    from instemb_rag.encoder.composed.encoder import TwoSpacesEncoder

    before = shipped_llm_folder()
    files = sorted(path.relative_to(before) for path in before.rglob("*") if path.is_file())
    inside = composed_default_dir / DOCUMENTS_LLM_DIR
    assert files == sorted(path.relative_to(inside) for path in inside.rglob("*") if path.is_file())
    assert all((inside / name).read_bytes() == (before / name).read_bytes() for name in files)

    monkeypatch.setattr(model, "SHIPPED_MODEL_FOLDER", composed_default_dir)
    assert shipped_llm_folder() == inside
    default = InstEmbEncoder.from_pretrained(device="cpu")
    assert isinstance(default, TwoSpacesEncoder) and default.sentence_encoder.reference == "minilm"
    assert default.documents_llm.fingerprint == default_encoder.fingerprint and default.llm_weight == 0.7
    documents = default.encode_documents(TEXTS)
    split = default_encoder.dimension
    np.testing.assert_allclose(documents[:, :split] * math.sqrt(2), default_encoder.encode_documents(TEXTS), atol=1e-5)
    queries = default.encode_queries(TEXTS, "focus on weight", llm_weight=1.0)  # the LLM half alone
    expected = default_encoder.encode_queries(TEXTS, "focus on weight")
    np.testing.assert_allclose(queries[:, :split], expected, atol=1e-5)  # a unit query: [a; 0]
