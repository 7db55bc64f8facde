"""Two-tower encoders (issue 44): documents by a sentence encoder, queries by the LLM into its space."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from instemb_rag import InstEmbEncoder
from instemb_rag.encoder.composed.encoder import TwoTowerEncoder
from instemb_rag.encoder.modules.sentence_encoder import SENTENCE_ENCODER_DIR, SentenceEncoder
from instemb_rag.errors import CheckpointError, FingerprintMismatchError, InstEmbError


def test_documents_come_from_the_tower_and_queries_from_the_llm(tiny_two_tower, tiny_st_dir):
    documents = ["the tent keeps out rain", "the stove boils water fast"]
    sentence_encoder = SentenceEncoder.load(str(tiny_st_dir))
    expected = sentence_encoder.encode(documents)
    assert np.allclose(tiny_two_tower.encode_documents(documents), expected, atol=1e-6)
    queries = tiny_two_tower.encode_queries(["is the tent dry"], "focus on weather")
    assert queries.shape == (1, sentence_encoder.dimension)
    assert np.isclose(np.linalg.norm(queries[0]), 1.0, atol=1e-5)
    # The instruction reaches the query LLM: another instruction, another vector.
    other = tiny_two_tower.encode_queries(["is the tent dry"], "focus on the price")
    assert not np.allclose(queries, other)


def test_a_document_instruction_is_refused_in_two_tower_mode(tiny_two_tower):
    with pytest.raises(InstEmbError, match="two-tower"):
        tiny_two_tower.encode_documents(["a document"], "focus on weather")
    # Blank means none (instructions.py), as everywhere else.
    assert tiny_two_tower.encode_documents(["a document"], "  ").shape == (1, tiny_two_tower.dimension)


def test_identity_names_both_towers(tiny_two_tower, tiny_encoder, tiny_st_dir):
    sentence_encoder = SentenceEncoder.load(str(tiny_st_dir))
    assert tiny_two_tower.is_two_tower and not tiny_encoder.is_two_tower
    assert tiny_two_tower.document_fingerprint == sentence_encoder.fingerprint
    assert tiny_encoder.document_fingerprint == tiny_encoder.fingerprint
    symmetric = tiny_two_tower.query_llm  # the LLM without its sentence encoder
    assert symmetric.fingerprint != tiny_two_tower.fingerprint
    # A folder sentence encoder is recorded as the model folder's own TOWER_DIR (a save copies it in):
    # no absolute path in the config or the fingerprint.
    assert tiny_two_tower.sentence_encoder.recorded_config() == {
        **sentence_encoder.get_config_dict(),
        "encoder": SENTENCE_ENCODER_DIR,
    }


def test_a_tower_needs_a_head_into_its_space(tiny_encoder, tiny_st_dir):
    sentence_encoder = SentenceEncoder.load(str(tiny_st_dir))
    with pytest.raises(InstEmbError, match="projection head"):
        TwoTowerEncoder(tiny_encoder, sentence_encoder)


def test_a_saved_two_tower_checkpoint_loads_as_it_was(tiny_two_tower, tmp_path):
    tiny_two_tower.save(tmp_path / "ckpt")
    config = json.loads((tmp_path / "ckpt" / "instemb_parts.json").read_text())
    assert set(config["parts"]["sentence_encoder"]["config"]) == {"encoder", "fingerprint", "dimension"}
    loaded = InstEmbEncoder.from_pretrained(tmp_path / "ckpt", device="cpu")
    assert loaded.is_two_tower and loaded.fingerprint == tiny_two_tower.fingerprint
    texts = ["the tent keeps out rain"]
    assert np.allclose(loaded.encode_documents(texts), tiny_two_tower.encode_documents(texts), atol=1e-6)
    assert np.allclose(
        loaded.encode_queries(texts, "focus on weather"),
        tiny_two_tower.encode_queries(texts, "focus on weather"),
        atol=1e-5,
    )


def test_a_checkpoint_refuses_another_tower(tiny_two_tower, tiny_st_dir, tmp_path):
    tiny_two_tower.save(tmp_path / "ckpt")
    changed = tmp_path / "other_tower"
    shutil.copytree(tiny_st_dir, changed)
    (changed / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 16, "do_lower_case": False}))
    path = tmp_path / "ckpt" / "instemb_parts.json"
    config = json.loads(path.read_text())
    config["parts"]["sentence_encoder"]["config"]["encoder"] = str(changed)
    path.write_text(json.dumps(config))
    with pytest.raises(FingerprintMismatchError, match="fingerprint"):
        InstEmbEncoder.from_pretrained(tmp_path / "ckpt", device="cpu")


def test_export_attaches_a_tower_only_over_a_matching_head(tiny_two_tower, tiny_encoder, tiny_st_dir, tmp_path):
    from instemb_rag.encoder.composed.export import export_model

    tower_config = SentenceEncoder.load(str(tiny_st_dir)).get_config_dict()
    tiny_two_tower.query_llm.save(tmp_path / "symmetric_with_head")
    export_model(tmp_path / "symmetric_with_head", tmp_path / "two_tower", sentence_encoder=tower_config)
    assert InstEmbEncoder.from_pretrained(tmp_path / "two_tower", device="cpu").is_two_tower
    tiny_encoder.save(tmp_path / "no_head")
    with pytest.raises(CheckpointError, match="projection head"):
        export_model(tmp_path / "no_head", tmp_path / "bad", sentence_encoder=tower_config)


def test_eval_reuses_a_corpus_across_query_towers_over_one_sentence_encoder(tiny_two_tower, tmp_path):
    import torch

    from instemb_rag.encoder.modules.projection import Projection
    from instemb_rag.eval.cache import EmbeddingCache, embed_corpus

    cache = EmbeddingCache(tmp_path / "cache")
    ids, texts = ["d1", "d2"], ["the tent keeps out rain", "the stove boils water fast"]
    first, cached = embed_corpus(tiny_two_tower, ids, texts, cache=cache)
    assert not cached
    torch.manual_seed(3)
    other = tiny_two_tower.with_projection(Projection(tiny_two_tower.hidden_size, tiny_two_tower.dimension))
    assert other.fingerprint != tiny_two_tower.fingerprint
    again, cached = embed_corpus(other, ids, texts, cache=cache)
    assert cached and np.array_equal(again, first)
    # A symmetric encoder keys on its own fingerprint: nothing of the two-tower corpus is reused.
    symmetric = tiny_two_tower.query_llm
    _, cached = embed_corpus(symmetric, ids, texts, cache=cache)
    assert not cached
