"""The two-space objective (training/two_spaces/) on a tiny Llama and a tiny BERT sentence encoder:
step 0 is exactly the untrained mix, training lowers the mixed in-group InfoNCE, and the run ships a
two-space folder whose documents are the untrained mix's (same document fingerprint: an index of
them is searched as it is) and whose ``encode_queries`` is what the step ranked."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from helpers import build_tiny_teacher_folder
from test_geometry import PASSAGES, QUERIES, write_items
from testing import build_tiny_model_folder

pytest.importorskip("sentence_transformers")


@pytest.fixture(scope="module")
def setting(tmp_path_factory):
    root = tmp_path_factory.mktemp("two_spaces")
    return {
        "llm": build_tiny_model_folder(root / "llm", layers=3),
        "sentence_encoder": build_tiny_teacher_folder(root / "sentence_encoder"),
        "items": write_items(root / "items.jsonl"),
    }


def config_for(setting, tmp_path, **overrides):
    from instemb_rag.training.args import load_config

    values = {
        "model.model_name_or_path": str(setting["llm"]),
        "model.max_length": 48,
        "model.lookahead_length": 2,
        "model.trainable_top_layers": 1,
        "model.lora_rank": 4,
        "model.train_lookahead": False,
        "two_spaces.texts_file": str(setting["items"]),
        "two_spaces.documents_llm": str(setting["llm"]),
        "two_spaces.sentence_encoder": str(setting["sentence_encoder"]),
        "two_spaces.prefix_cache_dir": str(tmp_path / "prefix"),
        "two_spaces.embedding_dir": str(tmp_path / "halves"),
        "two_spaces.bank_negatives": 2,
        "two_spaces.anchor_weight": 0.0,
        "two_spaces.head_learning_rate": 5e-2,
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


def untrained(setting, llm_weight=0.5):
    from instemb_rag.encoder.load import untrained_two_spaces

    llm = setting["llm"]
    return untrained_two_spaces(
        str(llm), str(setting["sentence_encoder"]), llm_weight=llm_weight, device="cpu", lookahead_length=2
    )


def trained_queries():
    rows = {pid: row for row, (pid, _, _) in enumerate(PASSAGES)}
    return [(text, instruction, rows[positive]) for text, instruction, _, positive in QUERIES if positive]


def mixed_loss(queries: np.ndarray, documents: np.ndarray, positives: list[int]) -> float:
    # queries . documents = (w cos_LLM + (1 - w) cos_sentence) * two_spaces_scale(w): ranks as the loss does
    logits = torch.as_tensor(queries @ documents.T) / 0.05
    return float(torch.nn.functional.cross_entropy(logits, torch.tensor(positives)))


def test_the_untrained_mix_scores_by_the_weighted_cosines(setting):
    from instemb_rag.encoder.modules.sentence_encoder import SentenceEncoder

    encoder = untrained(setting, llm_weight=0.7)
    sentence_encoder = SentenceEncoder.load(str(setting["sentence_encoder"]))
    texts, instructions = ["light tent for rain", "compact stove"], ["focus on durability", None]
    documents = [text for _, text, _ in PASSAGES]
    llm_queries = encoder.documents_llm.encode(texts, instructions)
    llm_documents = encoder.documents_llm.encode(documents)
    sentence_encoder_queries, tower_documents = (
        sentence_encoder.anchor_vectors(texts, instructions),
        sentence_encoder.encode(documents),
    )
    from instemb_rag.encoder.composed.encoder import two_spaces_scale

    expected = (
        0.7 * llm_queries @ llm_documents.T + 0.3 * sentence_encoder_queries @ tower_documents.T
    ) * two_spaces_scale(0.7)
    scores = encoder.encode_queries(texts, instructions) @ encoder.encode_documents(documents).T
    np.testing.assert_allclose(scores, expected, atol=1e-5)
    # The knob: another weight per call, the same stored documents.
    scores = encoder.encode_queries(texts, instructions, llm_weight=0.2) @ encoder.encode_documents(documents).T
    np.testing.assert_allclose(
        scores,
        (0.2 * llm_queries @ llm_documents.T + 0.8 * sentence_encoder_queries @ tower_documents.T)
        * two_spaces_scale(0.2),
        atol=1e-5,
    )
    explained = encoder.explain(texts[0], instructions[0], documents[:2], llm_weight=0.2)
    assert [round(row["score"], 5) for row in explained] == [round(float(s), 5) for s in scores[0, :2]]


def test_the_run_starts_at_the_mix_and_ships_a_two_space_folder(setting, tmp_path, monkeypatch):
    from instemb_rag import InstEmbEncoder
    from instemb_rag.encoder.composed.encoder import TwoSpacesEncoder
    from instemb_rag.training.objectives import objective_for
    from instemb_rag.training.trainer import train

    monkeypatch.setenv("INSTEMB_HOME", str(tmp_path / "home"))
    config = config_for(setting, tmp_path)
    assert objective_for(config).name == "two_spaces"
    start = untrained(setting)
    queries = trained_queries()
    texts, instructions, positives = [q[0] for q in queries], [q[1] for q in queries], [q[2] for q in queries]
    documents = start.encode_documents([text for _, text, _ in PASSAGES])
    before = mixed_loss(start.encode_queries(texts, instructions), documents, positives)

    final = train(config, log=lambda _: None)
    encoder = InstEmbEncoder.from_pretrained(final, device="cpu")
    assert isinstance(encoder, TwoSpacesEncoder) and encoder.has_query_llm and encoder.gate is not None
    assert encoder.document_fingerprint == start.document_fingerprint
    np.testing.assert_allclose(encoder.encode_documents([PASSAGES[0][1]]), documents[:1], atol=1e-5)
    after = mixed_loss(encoder.encode_queries(texts, instructions), documents, positives)
    assert after < before
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [row["step"] for row in rows] == list(range(1, 13)) and {"infonce", "llm_weight"} <= set(rows[0])
    assert math.isclose(rows[0]["llm_weight"], 0.5, abs_tol=0.05)  # the gate starts at the mix's weight

    # Another weight for the trained model: its LLM folders are copied as they are (LoRA unmerged).
    from typer.testing import CliRunner

    from instemb_rag.cli import app

    fixed = tmp_path / "fixed"
    args = ["compose", "--from", str(final), "--llm-weight", "0.7", "--no-gate", "--out", str(fixed)]
    result = CliRunner().invoke(app, [*args, "--device", "cpu"], terminal_width=200)
    assert result.exit_code == 0, result.output
    for part in ("documents_llm", "query_llm"):
        stored = sorted(p.relative_to(final) for p in (final / part).rglob("*") if p.is_file())
        assert stored == sorted(p.relative_to(fixed) for p in (fixed / part).rglob("*") if p.is_file())
        assert all((final / name).read_bytes() == (fixed / name).read_bytes() for name in stored)
