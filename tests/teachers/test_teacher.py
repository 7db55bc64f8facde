"""load_teacher / Teacher / teacher_text on a tiny sentence-transformers folder built in the test."""

from __future__ import annotations

import json
import shutil
import sys

import numpy as np
import pytest

from instemb_rag.teachers.errors import TeacherError
from instemb_rag.teachers.fingerprint import FINGERPRINT_CACHE_NAME, folder_fingerprint
from instemb_rag.teachers.teacher import load_teacher, teacher_text


def test_teacher_text_pastes_the_instruction_in_front():
    assert teacher_text("which tent?", "Focus on weight.") == "Focus on weight. which tent?"
    assert teacher_text("which tent?", None) == teacher_text("which tent?", "") == "which tent?"


def test_a_local_folder_is_a_teacher(tiny_st_dir):
    teacher = load_teacher(tiny_st_dir)
    assert (teacher.name, teacher.dimension) == ("model", 32)
    embeddings = teacher.encode(["the tent is light", "a gas stove", "the tent is light"], batch_size=2)
    assert embeddings.dtype == np.float32 and embeddings.shape == (3, 32)
    np.testing.assert_allclose(np.linalg.norm(embeddings, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(embeddings[0], embeddings[2], atol=1e-6)
    assert not np.allclose(embeddings[0], embeddings[1])
    assert teacher.encode([]).shape == (0, 32)
    with pytest.raises(TypeError, match="list of texts"):
        teacher.encode("one string")


def test_the_fingerprint_is_cached_and_follows_the_weights(tiny_st_dir, tmp_path):
    folder = shutil.copytree(tiny_st_dir, tmp_path / "copy")
    first = folder_fingerprint(folder)
    assert first == folder_fingerprint(tiny_st_dir)  # content, not location
    cached = json.loads((folder / FINGERPRINT_CACHE_NAME).read_text())
    assert cached["fingerprint"] == first and "model.safetensors" in [row[0] for row in cached["files"]]
    (folder / "README.md").write_text("notes do not change the embeddings")
    assert folder_fingerprint(folder) == first
    weights = folder / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF
    weights.write_bytes(bytes(data))
    assert folder_fingerprint(folder) != first


def test_teacher_errors_say_what_to_do(tiny_st_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("INSTEMB_HOME", str(tmp_path / "home"))
    with pytest.raises(TeacherError, match=r"'mpnet' is not installed: run `instemb-rag teachers install mpnet`"):
        load_teacher("mpnet")
    with pytest.raises(TeacherError, match=r"neither a teacher name \(minilm, mpnet\) nor a sentence-transformers"):
        load_teacher(tmp_path / "absent")
    with pytest.raises(TeacherError, match="holds no modules.json"):
        load_teacher(tmp_path)
    folder = shutil.copytree(tiny_st_dir, tmp_path / "pickled")
    (folder / "model.safetensors").rename(folder / "pytorch_model.bin")
    with pytest.raises(TeacherError, match="holds no .safetensors weights"):
        load_teacher(folder)


def test_without_sentence_transformers_a_plain_folder_loads_and_training_names_the_extra(tiny_st_dir, monkeypatch):
    expected = load_teacher(tiny_st_dir).encode(["the tent is light"])
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # what an absent package looks like
    # Transformer + Pooling + Normalize run on transformers alone (teachers/st_folder.py).
    np.testing.assert_array_equal(load_teacher(tiny_st_dir).encode(["the tent is light"]), expected)
    with pytest.raises(TeacherError, match=r"pip install 'instemb-rag\[train\]'"):
        load_teacher(tiny_st_dir, for_training=True)


def test_a_folder_with_other_modules_needs_the_library(tiny_st_dir, tmp_path, monkeypatch):
    folder = shutil.copytree(tiny_st_dir, tmp_path / "dense")
    modules = json.loads((folder / "modules.json").read_text())
    modules.insert(2, {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"})
    (folder / "modules.json").write_text(json.dumps(modules))
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    with pytest.raises(TeacherError, match=r"pip install 'instemb-rag\[train\]'"):
        load_teacher(folder)
