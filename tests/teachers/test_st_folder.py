"""teachers/st_folder.py: a sentence-transformers folder run without the library gives
the library's vectors (within 1e-5), for the folder formats of sentence-transformers 6 and of the
older releases (all-MiniLM-L6-v2's), and refuses what it does not run."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from testing import minilm_or_skip

from instemb_rag.teachers.st_folder import (
    SentenceEncoderModel,
    UnsupportedSentenceFolder,
    read_pipeline,
)

TEXTS = [
    "the tent is light",
    "  Focus on WEIGHT.  which tent is light for a trip?  ",  # spaces either side, capitals
    "",
    "a",
    " ".join(["rain wind nylon packed size"] * 20),  # longer than the window: cut
    "tab\tand\nnewline in a review",
]


def library_vectors(folder, texts, batch_size):
    sentence_transformers = pytest.importorskip("sentence_transformers")
    model = sentence_transformers.SentenceTransformer(str(folder), device="cpu", local_files_only=True)
    return model, model.encode(texts, batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True)


def assert_same_as_the_library(folder, texts=TEXTS):
    lean = SentenceEncoderModel.load(folder)
    for batch_size in (64, 2):  # one batch; batches padded to different widths
        library, expected = library_vectors(folder, texts, batch_size)
        ours = lean.encode(texts, batch_size=batch_size, normalize_embeddings=True)
        assert ours.dtype == np.float32 and ours.shape == expected.shape
        np.testing.assert_allclose(ours, expected, atol=1e-5, rtol=0)
    assert lean.max_seq_length == library.max_seq_length
    assert lean.get_embedding_dimension() == library.get_embedding_dimension()
    return lean


def older_format_copy(folder, target, pooling: dict, transformer: dict):
    """The folder as sentence-transformers 2-5 saved it: module paths under ``models``, pooling flags,
    max_seq_length and do_lower_case in sentence_bert_config.json."""
    copy = shutil.copytree(folder, target)
    modules = json.loads((copy / "modules.json").read_text())
    for entry, kind in zip(modules, ("Transformer", "Pooling", "Normalize")):
        entry["type"] = f"sentence_transformers.models.{kind}"
    (copy / "modules.json").write_text(json.dumps(modules))
    flags = {
        f"pooling_mode_{name}": False for name in ("cls_token", "mean_tokens", "max_tokens", "mean_sqrt_len_tokens")
    }
    (copy / "1_Pooling" / "config.json").write_text(json.dumps({"word_embedding_dimension": 32, **flags, **pooling}))
    (copy / "sentence_bert_config.json").write_text(json.dumps(transformer))
    return copy


def test_a_sentence_transformers_6_folder_gives_the_library_vectors(tiny_st_dir):
    lean = assert_same_as_the_library(tiny_st_dir)
    assert type(lean.transformer).__name__ == "BertModel"  # imported directly, not through AutoModel
    assert lean.encode([]).shape == (0, 32)


@pytest.mark.parametrize(
    ("pooling", "transformer"),
    [
        ({"pooling_mode_mean_tokens": True}, {"max_seq_length": 12, "do_lower_case": False}),
        (
            {"pooling_mode_cls_token": True, "pooling_mode_max_tokens": True},
            {"max_seq_length": 40, "do_lower_case": True},
        ),
        ({"pooling_mode_mean_sqrt_len_tokens": True}, {}),
    ],
)
def test_an_older_folder_gives_the_library_vectors(tiny_st_dir, tmp_path, pooling, transformer):
    folder = older_format_copy(tiny_st_dir, tmp_path / "older", pooling, transformer)
    assert_same_as_the_library(folder)


def test_without_normalize_the_vectors_are_the_pooled_states(tiny_st_dir, tmp_path):
    folder = shutil.copytree(tiny_st_dir, tmp_path / "unnormalised")
    modules = json.loads((folder / "modules.json").read_text())[:2]
    (folder / "modules.json").write_text(json.dumps(modules))
    assert read_pipeline(folder)["normalize"] is False
    assert_same_as_the_library(folder)
    norms = np.linalg.norm(SentenceEncoderModel.load(folder).encode(["the tent is light", "gas stove"]), axis=1)
    assert not np.allclose(norms, 1.0)


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (lambda folder: _add_module(folder, "sentence_transformers.models.Dense"), "Dense"),
        (lambda folder: _write(folder / "1_Pooling" / "config.json", {"pooling_mode": "weightedmean"}), "weightedmean"),
        (lambda folder: _write(folder / "sentence_bert_config.json", {"model_args": {"x": 1}}), "model_args"),
        (lambda folder: (folder / "modules.json").unlink(), "modules.json"),
    ],
)
def test_what_it_does_not_run_is_refused_by_name(tiny_st_dir, tmp_path, change, named):
    folder = shutil.copytree(tiny_st_dir, tmp_path / "other")
    change(folder)
    with pytest.raises(UnsupportedSentenceFolder, match=named):
        SentenceEncoderModel.load(folder)


def _write(path, raw: dict) -> None:
    path.write_text(json.dumps(raw))


def _add_module(folder, kind: str) -> None:
    modules = json.loads((folder / "modules.json").read_text())
    modules.insert(2, {"idx": 2, "name": "2", "path": "2_Other", "type": kind})
    (folder / "modules.json").write_text(json.dumps(modules))


@pytest.mark.slow
def test_minilm_gives_the_library_vectors():
    from instemb_rag.teachers.registry import installed_teacher_dir

    minilm_or_skip()
    long_text = " ".join(["Which lightweight tent keeps the rain out on a windy ridge?"] * 40)
    assert_same_as_the_library(installed_teacher_dir("minilm"), TEXTS + [long_text])
