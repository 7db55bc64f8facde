"""Two-tower model folders travel whole and keep what they are (issue 50, "Fix on the way"): a
folder sentence encoder is copied in and recorded relative, an export keeps the query anchor, the anchor
warns when an instruction pushes the query out of the sentence encoder's window, and ``to`` moves the sentence encoder.
Since issue 54 a save writes a folder of parts (instemb_parts.json: the LLM in query_llm/, the
sentence encoder's entry in its parts); an older two-tower checkpoint loads through the converter
(tests/encoder/test_layouts_unchanged.py)."""

from __future__ import annotations

import json
import shutil
import warnings

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from instemb_rag import InstEmbEncoder
from instemb_rag.cli import app
from instemb_rag.encoder.composed.encoder import TwoTowerEncoder
from instemb_rag.encoder.composed.export import export_model
from instemb_rag.encoder.modules.sentence_encoder import SENTENCE_ENCODER_DIR, AnchorTruncationWarning, SentenceEncoder
from instemb_rag.errors import CheckpointError, FingerprintMismatchError
from instemb_rag.teachers.teacher import teacher_text

TEXTS = ["the tent keeps out rain", "the stove boils water fast"]
ANCHORED = "instemb_rag.encoder.composed.routes.AnchoredQueries"  # the route's class path, as recorded


@pytest.fixture()
def anchored(tiny_two_tower):
    return tiny_two_tower.with_anchor()


def same_embeddings(a, b) -> bool:
    return np.allclose(a.encode_documents(TEXTS), b.encode_documents(TEXTS), atol=1e-6) and np.allclose(
        a.encode_queries(TEXTS, "focus on weather"), b.encode_queries(TEXTS, "focus on weather"), atol=1e-5
    )


def test_the_sentence_encoder_folder_has_one_name_in_every_model_folder():
    assert SENTENCE_ENCODER_DIR == "sentence_encoder"


def test_a_saved_checkpoint_holds_its_folder_tower_and_loads_the_same_after_a_move(anchored, tiny_st_dir, tmp_path):
    anchored.save(tmp_path / "a" / "ckpt")
    text = (tmp_path / "a" / "ckpt" / "instemb_parts.json").read_text()
    config = json.loads(text)
    assert config["parts"]["sentence_encoder"]["config"]["encoder"] == SENTENCE_ENCODER_DIR
    assert config["routes"]["query"]["type"] == ANCHORED
    assert str(tiny_st_dir) not in text and str(tmp_path) not in text
    assert f"{SENTENCE_ENCODER_DIR}/modules.json" in config["files"]
    shutil.move(tmp_path / "a" / "ckpt", tmp_path / "b" / "moved")
    shutil.rmtree(tmp_path / "a")
    loaded = InstEmbEncoder.from_pretrained(tmp_path / "b" / "moved", device="cpu")
    assert loaded.sentence_encoder.teacher.folder == (tmp_path / "b" / "moved" / SENTENCE_ENCODER_DIR).resolve()
    assert loaded.fingerprint == anchored.fingerprint
    assert loaded.document_fingerprint == anchored.document_fingerprint
    assert same_embeddings(loaded, anchored)
    # Saved again, from where it was loaded: the same checkpoint.
    loaded.save(tmp_path / "c")
    assert InstEmbEncoder.from_pretrained(tmp_path / "c", device="cpu").fingerprint == anchored.fingerprint


def test_a_checkpoint_missing_a_tower_file_is_refused(tiny_two_tower, tmp_path):
    tiny_two_tower.save(tmp_path / "ckpt")
    (tmp_path / "ckpt" / SENTENCE_ENCODER_DIR / "modules.json").unlink()
    with pytest.raises(CheckpointError, match=f"{SENTENCE_ENCODER_DIR}/modules.json is missing"):
        InstEmbEncoder.from_pretrained(tmp_path / "ckpt", device="cpu")


def test_a_named_tower_is_not_copied(tiny_two_tower, tmp_path, monkeypatch):
    from instemb_rag.teachers import registry

    monkeypatch.setitem(registry.TEACHERS, "tiny", registry.TEACHERS["minilm"])
    named = SentenceEncoder(tiny_two_tower.sentence_encoder.teacher, "tiny")
    assert TwoTowerEncoder(tiny_two_tower.query_llm, named).sentence_encoder.recorded_config()["encoder"] == "tiny"
    TwoTowerEncoder(tiny_two_tower.query_llm, named).save(tmp_path / "ckpt")
    assert not (tmp_path / "ckpt" / SENTENCE_ENCODER_DIR).exists()


def test_export_copies_the_folder_tower_and_keeps_the_anchor(anchored, tiny_st_dir, tmp_path):
    anchored.save(tmp_path / "ckpt")
    export_model(tmp_path / "ckpt", tmp_path / "out", max_length=48)
    shutil.rmtree(tmp_path / "ckpt")
    config = json.loads((tmp_path / "out" / "instemb_parts.json").read_text())
    assert config["parts"]["sentence_encoder"]["config"]["encoder"] == SENTENCE_ENCODER_DIR
    assert config["routes"]["query"]["type"] == ANCHORED
    loaded = InstEmbEncoder.from_pretrained(tmp_path / "out", device="cpu")
    assert same_embeddings(loaded, anchored.with_options(max_length=48))


def test_cli_export_with_a_tower_keeps_the_anchor_and_copies_the_folder(anchored, tiny_st_dir, tmp_path):
    anchored.save(tmp_path / "ckpt")
    result = CliRunner().invoke(
        app, ["export", str(tmp_path / "ckpt"), str(tmp_path / "out"), "--tower", str(tiny_st_dir)]
    )
    assert result.exit_code == 0, result.output
    text = (tmp_path / "out" / "instemb_parts.json").read_text()
    config = json.loads(text)
    assert config["parts"]["sentence_encoder"]["config"] == anchored.sentence_encoder.recorded_config()
    assert config["routes"]["query"]["type"] == ANCHORED
    assert str(tiny_st_dir) not in text
    shutil.move(tmp_path / "out", tmp_path / "moved")
    loaded = InstEmbEncoder.from_pretrained(tmp_path / "moved", device="cpu")
    assert loaded.anchored and loaded.fingerprint == anchored.fingerprint
    assert same_embeddings(loaded, anchored)


def test_export_adds_a_folder_tower_to_a_symmetric_checkpoint_unanchored(tiny_two_tower, tiny_st_dir, tmp_path):
    tiny_two_tower.query_llm.save(tmp_path / "symmetric")
    entry = SentenceEncoder.load(str(tiny_st_dir)).get_config_dict()
    export_model(tmp_path / "symmetric", tmp_path / "two_tower", sentence_encoder=entry)
    config = json.loads((tmp_path / "two_tower" / "instemb_parts.json").read_text())
    assert config["parts"]["sentence_encoder"]["config"] == {**entry, "encoder": SENTENCE_ENCODER_DIR}
    assert config["routes"]["query"]["type"] == "instemb_rag.encoder.composed.routes.LLMQueries"  # not anchored
    loaded = InstEmbEncoder.from_pretrained(tmp_path / "two_tower", device="cpu")
    assert loaded.fingerprint == tiny_two_tower.fingerprint


def test_export_refuses_a_tower_folder_that_is_not_the_one_named(tiny_two_tower, tiny_st_dir, tmp_path):
    tiny_two_tower.query_llm.save(tmp_path / "symmetric")
    other = tmp_path / "other"
    shutil.copytree(tiny_st_dir, other)
    (other / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 16, "do_lower_case": False}))
    entry = {**SentenceEncoder.load(str(tiny_st_dir)).get_config_dict(), "encoder": str(other)}
    with pytest.raises(FingerprintMismatchError, match="another sentence encoder"):
        export_model(tmp_path / "symmetric", tmp_path / "bad", sentence_encoder=entry)
    assert not (tmp_path / "bad").exists()


def test_an_instruction_that_pushes_the_query_out_of_the_window_warns_once(anchored):
    long_instruction = " ".join(["focus on the weather and the rain"] * 8)  # past the tiny sentence encoder's 32 tokens
    with pytest.warns(AnchorTruncationWarning, match=r"2 of 3 instructions, .* it read each query whole") as caught:
        anchored.encode_queries(["is the tent dry", "a stove", "rain"], [long_instruction, long_instruction, None])
    assert len([w for w in caught if issubclass(w.category, AnchorTruncationWarning)]) == 1
    assert "(32 tokens, about 24 words)" in str(caught[0].message)
    with pytest.warns(AnchorTruncationWarning):
        anchored.encode_instructions("is the tent dry", [long_instruction, "focus on weather"])


def test_inputs_that_fit_do_not_warn_and_embed_as_the_pasted_baseline(anchored):
    sentence_encoder = anchored.sentence_encoder
    queries, instructions = ["is the tent dry", "a stove"], ["focus on weather", None]
    with warnings.catch_warnings():
        warnings.simplefilter("error", AnchorTruncationWarning)
        vectors = sentence_encoder.anchor_vectors(queries, instructions)
        # A long query with no instruction has no instruction to shorten: no warning either.
        sentence_encoder.anchor_vectors([" ".join(["rain"] * 64)], [None])
    baseline = sentence_encoder.teacher.encode([teacher_text(q, i) for q, i in zip(queries, instructions)])
    assert np.array_equal(vectors, baseline)


def test_to_moves_the_tower_with_the_encoder(tiny_two_tower):
    def tower_parameters():
        return list(tiny_two_tower.sentence_encoder.teacher.model.parameters())

    # A dtype change stays with the LLM: the sentence encoder keeps its own.
    assert tiny_two_tower.to(torch.float64) is tiny_two_tower
    assert {p.dtype for p in tower_parameters()} == {torch.float32}
    # A device move takes the sentence encoder along (the meta device needs no accelerator).
    assert tiny_two_tower.to("meta") is tiny_two_tower
    assert tiny_two_tower.device.type == "meta"
    assert {p.device.type for p in tower_parameters()} == {"meta"}
