"""The effect objective (training/effect/) on a tiny Llama and a tiny BERT sentence encoder: the
run caches every vector once, step 0 is the untrained arrangement, training lowers the loss, and
the final folder is an instruction-effect encoder whose queries rank as the step ranked, over the
untrained arrangement's documents (the same document fingerprint)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers import build_tiny_teacher_folder
from test_geometry import PASSAGES, QUERIES, write_items
from testing import build_tiny_model_folder

pytest.importorskip("sentence_transformers")


@pytest.fixture(scope="module")
def setting(tmp_path_factory):
    root = tmp_path_factory.mktemp("effect")
    return {
        "llm": build_tiny_model_folder(root / "llm", layers=2),
        "sentence_encoder": build_tiny_teacher_folder(root / "sentence_encoder"),
        "items": write_items(root / "items.jsonl"),
    }


def config_for(setting, tmp_path, **overrides):
    from instemb_rag.training.args import load_config

    values = {
        "model.lookahead_length": 2,
        "effect.texts_file": str(setting["items"]),
        "effect.documents_llm": str(setting["llm"]),
        "effect.sentence_encoder": str(setting["sentence_encoder"]),
        "effect.embedding_dir": str(tmp_path / "vectors"),
        "effect.bank_negatives": 2,
        "effect.rank": 4,
        "effect.validation_share": 0.0,
        "effect.map_learning_rate": 5e-2,
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


def loss_of(encoder, setting) -> float:
    texts = {pid: text for pid, text, _ in PASSAGES}
    ids = list(texts)
    documents = encoder.encode_documents([texts[pid] for pid in ids])
    chosen = [
        (text, instruction, ids.index(positive))
        for text, instruction, _, positive in QUERIES
        if positive and instruction
    ]
    queries = encoder.encode_queries([q for q, _, _ in chosen], [i for _, i, _ in chosen])
    logits = torch.as_tensor(queries @ documents.T) / 0.05
    return float(torch.nn.functional.cross_entropy(logits, torch.tensor([p for _, _, p in chosen])))


def test_training_lowers_the_loss_and_ships_an_effect_folder(setting, tmp_path):
    from instemb_rag import InstEmbEncoder
    from instemb_rag.encoder.composed.effect import InstructionEffectEncoder
    from instemb_rag.encoder.load import untrained_effect
    from instemb_rag.training.trainer import train

    final = train(config_for(setting, tmp_path))
    trained = InstEmbEncoder.from_pretrained(final, device="cpu")
    untrained = untrained_effect(
        str(setting["llm"]), str(setting["sentence_encoder"]), 1.5, device="cpu", lookahead_length=2
    )
    assert isinstance(trained, InstructionEffectEncoder)
    assert trained.document_fingerprint == untrained.document_fingerprint
    assert trained.fingerprint != untrained.fingerprint
    assert loss_of(trained, setting) < loss_of(untrained, setting)
    assert (tmp_path / "vectors").is_dir()  # every vector cached once, reused by a resume


def test_a_resumed_run_ends_where_an_unbroken_run_ends(setting, tmp_path):
    import shutil

    from instemb_rag import InstEmbEncoder
    from instemb_rag.training.trainer import train

    queries = [q for q, i, _, _ in QUERIES if i][:3]
    instructions = [i for _, i, _, _ in QUERIES if i][:3]
    whole = train(config_for(setting, tmp_path))
    expected = InstEmbEncoder.from_pretrained(whole, device="cpu").encode_queries(queries, instructions)
    # As a run killed after step 10: its last checkpoint is checkpoint-10.
    shutil.rmtree(tmp_path / "run" / "checkpoint-20")
    shutil.rmtree(whole)
    resumed = train(config_for(setting, tmp_path, **{"training.resume": True}))
    got = InstEmbEncoder.from_pretrained(resumed, device="cpu").encode_queries(queries, instructions)
    np.testing.assert_allclose(got, expected, atol=1e-5)


def test_an_items_file_without_a_training_query_says_what_it_must_hold(tmp_path):
    """A user of the wheel has no research/ scripts: both effect trainers' refusal describes the
    items file and names the command that writes one."""
    from instemb_rag.cli import app
    from instemb_rag.datasets.embedding_items import EmbeddingItem
    from instemb_rag.datasets.embedding_items import write_items as write_embedding_items
    from instemb_rag.errors import InstEmbError
    from instemb_rag.training.effect.args import EffectArguments
    from instemb_rag.training.effect.data import load_effect_data
    from instemb_rag.training.effect.query_llm import load_llm_effect_data

    items = tmp_path / "items.jsonl"  # a query without an instruction: nothing an effect trainer reads
    write_embedding_items(
        items,
        [EmbeddingItem("q", "query", "Which tent?", None, positive="p"), EmbeddingItem("p", "passage", "A tent.")],
    )
    loaders = [
        lambda: load_effect_data(str(items), None, 0.0, 0),
        lambda: load_llm_effect_data(EffectArguments(texts_file=str(items)), 0, None, None),
    ]
    for load in loaders:
        with pytest.raises(InstEmbError) as refused:
            load()
        message = str(refused.value)
        assert "holds no query with an instruction" in message and "research/" not in message
        assert "role 'query' or 'passage'" in message and "`instemb-rag build-distill-texts`" in message
    assert "build-distill-texts" in {command.name for command in app.registered_commands}
