"""The two-tower objective (training/two_tower/) on a tiny Llama student and a tiny BERT document
sentence encoder: it starts exactly at the anchor (the sentence encoder's own vector of instruction + query), lowers the
in-group InfoNCE against the sentence encoder's cached passages, and saves an anchored two-tower checkpoint whose
``encode_queries`` is what it trained."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import build_tiny_teacher_folder
from test_geometry import PASSAGES, QUERIES, write_items
from testing import build_tiny_model_folder

pytest.importorskip("sentence_transformers")


@pytest.fixture(scope="module")
def setting(tmp_path_factory):
    root = tmp_path_factory.mktemp("two_tower")
    return {
        "student": build_tiny_model_folder(root / "student", layers=3),
        "sentence_encoder": build_tiny_teacher_folder(root / "sentence_encoder"),
        "items": write_items(root / "items.jsonl"),
    }


def config_for(setting, tmp_path: Path, **overrides):
    from instemb_rag.training.args import load_config

    values = {
        "model.model_name_or_path": str(setting["student"]),
        "model.max_length": 48,
        "model.lookahead_length": 2,
        "model.trainable_top_layers": 1,
        "model.lora_rank": 4,
        "model.train_lookahead": False,
        "two_tower.sentence_encoder": str(setting["sentence_encoder"]),
        "two_tower.texts_file": str(setting["items"]),
        "two_tower.prefix_cache_dir": str(tmp_path / "prefix"),
        "two_tower.embedding_dir": str(tmp_path / "tower_cache"),
        "two_tower.bank_negatives": 2,
        "two_tower.anchor_weight": 0.0,
        "two_tower.head_learning_rate": 5e-2,
        "training.output_dir": str(tmp_path / "run"),
        "training.batch_size": 5,
        "training.max_steps": 12,
        "training.save_steps": 12,
        "training.warmup_steps": 1,
        "training.learning_rate": 1e-2,
        "training.contrastive_weight": 0.0,
        "training.distill_weight": 0.0,
        "training.show_progress": False,
        "training.device": "cpu",
        **overrides,
    }
    return load_config(None, values)


def ranking_loss(queries: np.ndarray, passages: np.ndarray, positives: list[int]) -> float:
    from instemb_rag.losses.two_tower import bank_infonce

    return float(
        bank_infonce(torch.as_tensor(queries), torch.as_tensor(passages), torch.tensor(positives), temperature=0.05)
    )


def trained_queries():
    """(text, instruction, positive passage row) of the items with a positive."""
    rows = {pid: row for row, (pid, _, _) in enumerate(PASSAGES)}
    return [(text, instruction, rows[positive]) for text, instruction, _, positive in QUERIES if positive]


def test_the_run_starts_at_the_anchor_and_ships_an_anchored_two_tower_checkpoint(setting, tmp_path, monkeypatch):
    from instemb_rag import InstEmbEncoder
    from instemb_rag.encoder.modules.sentence_encoder import SentenceEncoder
    from instemb_rag.training.objectives import objective_for
    from instemb_rag.training.trainer import train

    monkeypatch.setenv("INSTEMB_HOME", str(tmp_path / "home"))
    config = config_for(setting, tmp_path)
    assert objective_for(config).name == "two_tower"
    sentence_encoder = SentenceEncoder.load(str(setting["sentence_encoder"]))
    queries = trained_queries()
    texts, instructions = [q[0] for q in queries], [q[1] for q in queries]
    anchors = sentence_encoder.anchor_vectors(texts, instructions)
    passages = sentence_encoder.encode([text for _, text, _ in PASSAGES])
    positives = [q[2] for q in queries]

    final = train(config, log=lambda _: None)
    encoder = InstEmbEncoder.from_pretrained(final, device="cpu")
    assert encoder.is_two_tower and encoder.anchored
    assert encoder.document_fingerprint == sentence_encoder.fingerprint
    shipped = encoder.encode_queries(texts, instructions)
    # Trained: the queries moved off their anchors, and rank their passages better than the anchors do.
    assert not np.allclose(shipped, anchors, atol=1e-3)
    assert ranking_loss(shipped, passages, positives) < ranking_loss(anchors, passages, positives)
    # Documents are the sentence encoder's own vectors.
    np.testing.assert_allclose(encoder.encode_documents([PASSAGES[0][1]]), passages[:1], atol=1e-5)
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [row["step"] for row in rows] == list(range(1, 13)) and {"infonce", "anchor"} <= set(rows[0])


def test_an_untrained_anchored_encoder_embeds_queries_as_the_anchor(setting, tiny_encoder):
    from instemb_rag.encoder.composed.encoder import TwoTowerEncoder
    from instemb_rag.encoder.modules.projection import Projection
    from instemb_rag.encoder.modules.sentence_encoder import SentenceEncoder

    sentence_encoder = SentenceEncoder.load(str(setting["sentence_encoder"]))
    head = Projection(tiny_encoder.hidden_size, sentence_encoder.dimension)
    with torch.no_grad():
        head.linear.weight.zero_()
        head.linear.bias.zero_()
    encoder = TwoTowerEncoder(tiny_encoder.with_projection(head), sentence_encoder, anchored=True)
    texts, instructions = ["light tent for rain", "compact stove"], ["focus on durability", None]
    np.testing.assert_allclose(
        encoder.encode_queries(texts, instructions), sentence_encoder.anchor_vectors(texts, instructions), atol=1e-6
    )
