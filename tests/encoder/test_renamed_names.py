"""Issue 68 names round 2: where a name changed, the old one is the same object under its old
import path ("checkpoint" names only a trainer's saved step; an InstEmb LLM's folder is an LLM folder)."""

from __future__ import annotations

import importlib

import pytest

ALIASES = [
    ("instemb_rag.encoder.checkpoint", "is_checkpoint", "instemb_rag.encoder.llm_folder", "is_llm_folder"),
    ("instemb_rag.encoder.checkpoint", "export_checkpoint", "instemb_rag.encoder.llm_folder", "export_llm_folder"),
    ("instemb_rag.encoder.checkpoint", "load_parts", "instemb_rag.encoder.llm_folder", "load_contents"),
    ("instemb_rag.encoder.checkpoint", "CheckpointParts", "instemb_rag.encoder.llm_folder", "LlmFolderContents"),
    ("instemb_rag.encoder.checkpoint", "save", "instemb_rag.encoder.llm_folder", "save"),
    ("instemb_rag.encoder.checkpoint", "read_config", "instemb_rag.encoder.llm_folder", "read_config"),
    ("instemb_rag.encoder", "load_checkpoint", "instemb_rag.encoder", "load_llm_folder"),
    ("instemb_rag.encoder", "shipped_llm_checkpoint", "instemb_rag.encoder", "shipped_llm_folder"),
    ("instemb_rag.encoder.load", "load_checkpoint", "instemb_rag.encoder.load", "load_llm_folder"),
    ("instemb_rag.encoder.load", "shipped_llm_checkpoint", "instemb_rag.encoder.model", "shipped_llm_folder"),
    ("instemb_rag.encoder.model", "SHIPPED_CHECKPOINT", "instemb_rag.encoder.model", "SHIPPED_MODEL_FOLDER"),
    ("instemb_rag.encoder.composed", "llm_checkpoint_of", "instemb_rag.encoder.composed.spec", "llm_folder_of"),
    ("instemb_rag.encoder.references", "llm_from_checkpoint", "instemb_rag.encoder.references", "llm_from_folder"),
    (
        "instemb_rag.training.continuation",
        "StartingCheckpoint",
        "instemb_rag.training.continuation",
        "StartingLlmFolder",
    ),
    (
        "instemb_rag.training.continuation",
        "starting_checkpoint",
        "instemb_rag.training.continuation",
        "starting_llm_folder",
    ),
]


@pytest.mark.parametrize(("old_module", "old", "new_module", "new"), ALIASES)
def test_an_old_name_is_the_new_one(old_module, old, new_module, new):
    assert getattr(importlib.import_module(old_module), old) is getattr(importlib.import_module(new_module), new)


def test_the_sentence_encoder_still_reads_its_old_keyword(tmp_path, monkeypatch):
    """``SentenceEncoder.load(checkpoint_folder=)`` is the old name of ``model_folder=`` (issue 68 names round 2)."""
    from instemb_rag.encoder.modules import sentence_encoder

    read = []
    monkeypatch.setattr("instemb_rag.teachers.load_teacher", lambda target, device="cpu": read.append(target))
    monkeypatch.setattr(sentence_encoder.SentenceEncoder, "__init__", lambda self, teacher, reference: None)
    sentence_encoder.SentenceEncoder.load("sentence_encoder", model_folder=tmp_path)
    sentence_encoder.SentenceEncoder.load("sentence_encoder", checkpoint_folder=tmp_path)
    assert read == [tmp_path / "sentence_encoder"] * 2
    with pytest.raises(TypeError, match="not both"):
        sentence_encoder.SentenceEncoder.load("sentence_encoder", model_folder=tmp_path, checkpoint_folder=tmp_path)
