"""The effect objective with the LLM's query side training (training/effect/query_llm.py, issue 61)
on a tiny Llama and a tiny BERT sentence encoder: the final folder is an instruction-effect encoder
with a query LLM of its own over the same documents (no re-index), its queries rank better than
the untrained arrangement's, step 0 is that arrangement, a query's own traps are its negatives,
and the keep term is zero for an effect that moves nothing."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from helpers import build_tiny_teacher_folder
from test_effect import loss_of
from test_geometry import write_items
from testing import build_tiny_model_folder

pytest.importorskip("sentence_transformers")


@pytest.fixture(scope="module")
def setting(tmp_path_factory):
    root = tmp_path_factory.mktemp("effect_llm")
    items = write_items(root / "items.jsonl")
    # q0 ("focus on durability") gets p2 as its own trap: another aspect's passage.
    (root / "negatives.json").write_text(json.dumps({"q0": ["p2"]}))
    return {
        "llm": build_tiny_model_folder(root / "llm", layers=3),
        "sentence_encoder": build_tiny_teacher_folder(root / "sentence_encoder"),
        "items": items,
        "negatives": root / "negatives.json",
    }


def config_for(setting, tmp_path, **overrides):
    from instemb_rag.training.args import load_config

    values = {
        "model.model_name_or_path": str(setting["llm"]),
        "model.lookahead_length": 2,
        "model.max_length": 48,
        "model.trainable_top_layers": 2,
        "model.train_lookahead": False,
        "model.lora_rank": 4,
        "model.lora_alpha": 8,
        "effect.texts_file": str(setting["items"]),
        "effect.negatives_file": str(setting["negatives"]),
        "effect.documents_llm": str(setting["llm"]),
        "effect.sentence_encoder": str(setting["sentence_encoder"]),
        "effect.embedding_dir": str(tmp_path / "vectors"),
        "effect.prefix_cache_dir": str(tmp_path / "prefix"),
        "effect.query_llm": True,
        "effect.query_layers": 1,
        "effect.bank_negatives": 2,
        "effect.rank": 0,
        "effect.instruction_strength": 1.0,
        "effect.keep_weight": 0.1,
        "effect.validation_share": 0.0,
        "effect.map_learning_rate": 5e-2,
        "training.learning_rate": 5e-3,
        "training.output_dir": str(tmp_path / "run"),
        "training.batch_size": 5,
        "training.max_steps": 20,
        "training.save_steps": 10,
        "training.warmup_steps": 1,
        "training.show_progress": False,
        "training.device": "cpu",
        **overrides,
    }
    return load_config(None, values)


def test_training_the_query_llm_lowers_the_loss_over_the_same_documents(setting, tmp_path):
    from instemb_rag import InstEmbEncoder
    from instemb_rag.encoder.composed.effect import InstructionEffectEncoder
    from instemb_rag.encoder.load import untrained_effect
    from instemb_rag.training.objectives import objective_for
    from instemb_rag.training.trainer import train

    config = config_for(setting, tmp_path)
    assert objective_for(config).name == "effect_llm"
    final = train(config, log=lambda _: None)
    trained = InstEmbEncoder.from_pretrained(final, device="cpu")
    untrained = untrained_effect(
        str(setting["llm"]), str(setting["sentence_encoder"]), 1.0, device="cpu", lookahead_length=2
    )
    assert isinstance(trained, InstructionEffectEncoder) and trained.has_query_llm
    assert (final / "query_llm").is_dir()
    assert trained.document_fingerprint == untrained.document_fingerprint  # no re-index
    assert trained.fingerprint != untrained.fingerprint
    assert loss_of(trained, setting) < loss_of(untrained, setting)


def test_step_zero_is_the_untrained_arrangement(setting, tmp_path):
    from instemb_rag.encoder.load import untrained_effect
    from instemb_rag.training.objectives import objective_for
    from instemb_rag.training.parallel import SINGLE_PROCESS

    config = config_for(setting, tmp_path)
    objective = objective_for(config)(config, SINGLE_PROCESS, torch.device("cpu"), lambda _: None)
    objective.prepare()
    rows = objective.data.training_rows
    scores, *_ = objective.ranked(rows, "check")
    columns, _ = objective.data.candidates(rows, 2, "check")
    untrained = untrained_effect(
        str(setting["llm"]), str(setting["sentence_encoder"]), 1.0, device="cpu", lookahead_length=2
    )
    texts = [objective.data.passages[c].text for c in columns]
    queries = [objective.data.queries[r] for r in rows]
    llm_docs, sentence_encoder_docs = untrained.document_route.halves(untrained, texts)
    effect, sentence_encoder_vectors, _ = untrained.query_by_space(
        [q.text for q in queries], [q.instruction for q in queries]
    )
    expected = sentence_encoder_vectors @ sentence_encoder_docs.T + effect @ llm_docs.T
    np.testing.assert_allclose(scores.detach().numpy(), expected, atol=2e-2)  # the cache's float16 states


def test_a_querys_traps_are_its_negatives_and_a_flat_effect_keeps(setting):
    from instemb_rag.datasets.embedding_items import read_items
    from instemb_rag.losses.instruction_effect import flat_contribution
    from instemb_rag.training.effect.query_llm import LLMEffectData

    items = read_items(str(setting["items"]))
    passages = [item for item in items if item.role == "passage"]
    queries = [item for item in items if item.role == "query" and item.instruction and item.positive]
    vectors = {name: torch.zeros(len(passages), 4) for name in ("sentence_encoder_passages", "llm_passages")}
    vectors["sentence_encoder_queries"] = torch.zeros(len(queries), 4)
    data = LLMEffectData(queries, passages, {"q2": ["p2"]}, vectors, 0.0, 0)
    third = [q.id for q in queries].index("q2")  # "compact stove": no group, p2 only as its trap
    columns, positives = data.candidates([third], 0, "s")
    assert [passages[c].id for c in columns] == ["p3", "p2"] and positives == [0]
    assert data.kind_of(third) == "trap"
    first = [q.id for q in queries].index("q0")  # group g1: p1 its positive, p2 the group's other passage
    columns, _ = data.candidates([first, third], 3, "s")
    allowed = data.own_columns([first, third], columns)  # group_negatives_only: the bank masked out
    assert {passages[c].id for c, keep in zip(columns, allowed[0].tolist()) if keep} == {"p1", "p2"}
    assert {passages[c].id for c, keep in zip(columns, allowed[1].tolist()) if keep} == {"p3", "p2"}
    candidates = torch.randn(5, 8)
    assert float(flat_contribution(torch.zeros(3, 8), candidates, 0.05)) == 0.0
    assert float(flat_contribution(torch.randn(3, 8), candidates, 0.05)) > 0.0


def test_the_instruction_contrast_pairs_a_query_with_its_siblings(setting, tmp_path):
    from instemb_rag.training.trainer import train

    overrides = {"effect.contrast_weight": 1.0, "training.max_steps": 2, "training.save_steps": 2}
    train(config_for(setting, tmp_path, **overrides), log=lambda _: None)
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    # q0 and q1 ("light tent for rain", group g1) and q4 and q5 ("warm nylon tent", g2) are siblings.
    assert all(row["contrast"] > 0 and np.isfinite(row["loss"]) for row in rows)


def test_a_resumed_run_ends_where_an_unbroken_run_ends(setting, tmp_path):
    import shutil

    from instemb_rag import InstEmbEncoder
    from instemb_rag.training.trainer import train

    queries, instructions = ["light tent for rain", "warm nylon tent"], ["focus on durability", "cold night"]
    whole = train(config_for(setting, tmp_path), log=lambda _: None)
    expected = InstEmbEncoder.from_pretrained(whole, device="cpu").encode_queries(queries, instructions)
    # As a run killed after step 10: its last checkpoint is checkpoint-10.
    shutil.rmtree(tmp_path / "run" / "checkpoint-20")
    shutil.rmtree(whole)
    resumed = train(config_for(setting, tmp_path, **{"training.resume": True}), log=lambda _: None)
    got = InstEmbEncoder.from_pretrained(resumed, device="cpu").encode_queries(queries, instructions)
    np.testing.assert_allclose(got, expected, atol=1e-5)
