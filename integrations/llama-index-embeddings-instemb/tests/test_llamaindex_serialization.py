"""What defines an embedding travels with it: to_dict/from_dict, pickling, settings as fields."""

from __future__ import annotations

import logging
import pickle

import numpy as np
import pytest
from llama_index.core.bridge.pydantic import ValidationError

from instemb_rag import InstEmbEncoder
from instemb_rag.errors import InstEmbError
from llama_index.embeddings.instemb import InstEmbEmbedding, InstEmbRetriever

QUERY = "which tent is light ?"


def test_settings_are_fields_and_define_the_encoder(tiny_model_dir):
    embed_model = InstEmbEmbedding(tiny_model_dir, device="cpu", lookahead_length=4, max_length=64)
    reference = InstEmbEncoder.from_pretrained(tiny_model_dir, device="cpu", lookahead_length=4, max_length=64)
    assert (embed_model.lookahead_length, embed_model.max_length) == (4, 64)
    assert embed_model.pooling == reference.settings.pooling and embed_model.precision == "fp32"
    assert embed_model.fingerprint == reference.fingerprint
    with pytest.raises(ValidationError, match="frozen"):
        embed_model.query_instruction = "focus on weight"
    with pytest.raises(InstEmbError, match="pooling='nonsense' is not one of: daap"):
        InstEmbEmbedding(tiny_model_dir, device="cpu", pooling="nonsense")


def test_to_dict_from_dict_reloads_the_same_encoder(tiny_model_dir, tiny_embed_model):
    saved = InstEmbEmbedding.from_encoder(
        tiny_embed_model.encoder, model_path=tiny_model_dir, query_instruction="focus on weight"
    ).to_dict()
    assert saved["model_path"] == str(tiny_model_dir) and saved["fingerprint"] == tiny_embed_model.fingerprint
    assert (saved["lookahead_length"], saved["max_length"], saved["timeout"]) == (4, 64, 60.0)
    loaded = InstEmbEmbedding.from_dict(saved)
    assert loaded.fingerprint == tiny_embed_model.fingerprint and loaded.query_instruction == "focus on weight"
    np.testing.assert_allclose(
        loaded.get_query_embedding(QUERY), tiny_embed_model.get_query_embedding_for(QUERY, "focus on weight"), atol=1e-5
    )


def test_from_dict_refuses_another_model(tiny_model_dir, tiny_embed_model):
    saved = InstEmbEmbedding.from_encoder(tiny_embed_model.encoder, model_path=tiny_model_dir).to_dict()
    saved["lookahead_length"] = 2  # the same weights under another setting: another encoder
    with pytest.raises(InstEmbError, match=f"saved for encoder {tiny_embed_model.fingerprint}"):
        InstEmbEmbedding.from_dict(saved)


def test_pickling_rebuilds_without_warnings(tiny_model_dir, tiny_embed_model, caplog):
    embed_model = InstEmbEmbedding.from_encoder(
        tiny_embed_model.encoder, model_path=tiny_model_dir, query_instruction="focus on durability"
    )
    with caplog.at_level(logging.WARNING):
        restored = pickle.loads(pickle.dumps(embed_model))
    assert not caplog.records, [record.getMessage() for record in caplog.records]
    assert restored.fingerprint == embed_model.fingerprint and restored.query_instruction == "focus on durability"
    np.testing.assert_allclose(restored.get_query_embedding(QUERY), embed_model.get_query_embedding(QUERY), atol=1e-5)
    bad = InstEmbEmbedding.from_encoder(tiny_embed_model.encoder, model_path=tiny_model_dir, lookahead_length=4)
    state = pickle.dumps(bad).replace(tiny_embed_model.fingerprint.encode(), b"0" * 32)
    with pytest.raises(InstEmbError, match="saved for encoder"):
        pickle.loads(state)


def test_index_folder_embedding_round_trips(tiny_model_dir, tmp_path):
    from instemb_rag.index import Indexer, IndexOptions
    from instemb_rag.index.manifest import model_label

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.txt").write_text("this tent is light and packed size is compact .")
    encoder = InstEmbEncoder.from_pretrained(tiny_model_dir, device="cpu")
    Indexer(encoder, IndexOptions(index_dir=tmp_path / "index", model_label=model_label(str(tiny_model_dir)))).run(
        corpus
    )
    with InstEmbRetriever.from_instemb_index(tmp_path / "index", device="cpu") as retriever:
        saved = retriever.embed_model.to_dict()
    assert saved["model_path"] == str(tiny_model_dir.resolve())
    assert InstEmbEmbedding.from_dict(saved).fingerprint == encoder.fingerprint


def test_with_instruction_is_a_view_sharing_the_encoder(tiny_embed_model):
    view = tiny_embed_model.with_instruction("focus on durability")
    assert view.encoder is tiny_embed_model.encoder and view.query_cache is tiny_embed_model.query_cache
    assert (view.query_instruction, tiny_embed_model.query_instruction) == ("focus on durability", "focus on weight")
    assert view.get_query_embedding(QUERY) == tiny_embed_model.get_query_embedding_for(QUERY, "focus on durability")
    assert tiny_embed_model.with_instruction("").get_query_embedding(QUERY) == (
        tiny_embed_model.get_query_embedding_for(QUERY, "")
    )
    with pytest.raises(InstEmbError, match="must be a string"):
        tiny_embed_model.with_instruction(3)
