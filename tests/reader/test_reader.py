"""The reader (issue 67) on a tiny reader built here: fusion, the cut, the routes, training and resume."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

QUERY = "which tent should i buy"
INSTRUCTION = "focus on weight"
TEXTS = ["a light tent for one", "a heavy tent for storms", "the tent is not light"]


@pytest.fixture(scope="module")
def reader_dir(tiny_st_dir, tmp_path_factory) -> Path:
    """A tiny reader (1-layer BERT of the tiny sentence encoder, LoRA r2) saved as training writes final/."""
    from testing import build_tiny_reader_folder

    return build_tiny_reader_folder(tmp_path_factory.mktemp("reader") / "final", tiny_st_dir, fusion_weight=0.3)


def test_score_is_first_stage_plus_weighted_sigmoid(reader_dir):
    from instemb_rag import Reranker
    from instemb_rag.reader.model import ReaderModel

    reranker = Reranker.from_pretrained(reader_dir)
    first = [0.5, 0.4, 0.45]
    fused = reranker.score(QUERY, INSTRUCTION, TEXTS, first)
    # The same logits from the unmerged model: merging LoRA changes nothing but the cost.
    logits, cut = ReaderModel.from_folder(reader_dir, merged=False).logits(QUERY, INSTRUCTION, TEXTS)
    assert cut == 0
    expected = [f + 0.3 / (1 + math.exp(-logit)) for f, logit in zip(first, logits)]
    assert fused == pytest.approx(expected, abs=1e-5)
    assert len(set(np.round(logits, 6))) == 3  # the reader tells the texts apart
    # Every fused score is at least its first-stage score: hits below the top stay below.
    assert all(value >= f for value, f in zip(fused, first))


def test_blank_instruction_is_plain_search(reader_dir):
    from instemb_rag import Reranker

    reranker = Reranker.from_pretrained(reader_dir)
    assert reranker.score(QUERY, None, TEXTS, [0.1, 0.2, 0.3]) == reranker.score(QUERY, "  ", TEXTS, [0.1, 0.2, 0.3])
    assert reranker.score(QUERY, INSTRUCTION, [], []) == []
    with pytest.raises(ValueError, match="one score per text"):
        reranker.score(QUERY, INSTRUCTION, TEXTS, [0.1])


def test_the_document_is_cut_never_the_query(reader_dir):
    from instemb_rag import Reranker
    from instemb_rag.reader.model import ReaderInputError

    reranker = Reranker.from_pretrained(reader_dir)
    long_text = " ".join(["tent"] * 200)
    result = reranker.scored(QUERY, INSTRUCTION, [TEXTS[0], long_text], [0.1, 0.1])
    assert result.cut == 1
    # What the reader read of the long text: the query and instruction whole, the text's start.
    first = f"{INSTRUCTION} {QUERY}"
    batch, cut = reranker.model.tokenize([first], [long_text])
    ids = batch["input_ids"][0].tolist()
    first_ids = reranker.model.tokenizer(first, add_special_tokens=False)["input_ids"]
    assert cut == [True] and len(ids) == 24
    assert ids[1 : 1 + len(first_ids)] == first_ids
    with pytest.raises(ReaderInputError, match="Shorten the query or the instruction"):
        reranker.score(" ".join(["tent"] * 30), INSTRUCTION, TEXTS, [0.0, 0.0, 0.0])


def test_model_folder_route_and_vectors_unchanged(reader_dir, tiny_model_dir, tiny_st_dir, tmp_path):
    from instemb_rag import InstEmbEncoder, Reranker
    from instemb_rag.encoder.load import untrained_effect
    from instemb_rag.reader.folder import with_reader
    from instemb_rag.reader.reranker import ReaderMissingError

    plain = tmp_path / "plain"
    untrained_effect(
        str(tiny_model_dir), str(tiny_st_dir), instruction_strength=1.0, device="cpu", lookahead_length=2
    ).save(plain)
    with pytest.raises(ReaderMissingError, match="--no-rerank"):
        Reranker.from_pretrained(plain)
    both = with_reader(plain, reader_dir, tmp_path / "with_reader", top=5)
    spec = json.loads((both / "instemb_parts.json").read_text())
    assert spec["routes"]["rerank"]["fusion_weight"] == 0.3 and spec["routes"]["rerank"]["top"] == 5
    assert "reader/adapter.safetensors" in spec["files"]
    before, after = (
        InstEmbEncoder.from_pretrained(plain, device="cpu"),
        InstEmbEncoder.from_pretrained(both, device="cpu"),
    )
    assert before.fingerprint == after.fingerprint and before.document_fingerprint == after.document_fingerprint
    docs = ["a light tent", "a storm tent"]
    assert np.allclose(before.encode_documents(docs), after.encode_documents(docs))
    reranker = Reranker.from_pretrained(both)
    assert reranker.top == 5
    assert reranker.score(QUERY, INSTRUCTION, TEXTS, [0.0] * 3) == Reranker.from_pretrained(reader_dir).score(
        QUERY, INSTRUCTION, TEXTS, [0.0] * 3
    )
    # A copy that lost a reader file refuses to load, naming it.
    (both / "reader" / "head.safetensors").unlink()
    with pytest.raises(Exception, match="head.safetensors"):
        Reranker.from_pretrained(both)


def test_reranked_matrix_rescores_each_rows_top_only(reader_dir):
    from instemb_rag import Reranker
    from instemb_rag.eval.reranked import reranked_matrix

    reranker = Reranker.from_pretrained(reader_dir)
    reranker = Reranker(reranker.model, type(reranker.route)(reader=".", fusion_weight=0.3, top=2), reader_dir)
    scores = np.array([[0.9, 0.1, 0.5], [0.2, 0.8, 0.7]])
    out = reranked_matrix(reranker, scores, TEXTS, [QUERY, QUERY], [INSTRUCTION, None])
    assert out[0, 1] == 0.1 and out[1, 0] == 0.2  # below each row's top 2: unchanged
    assert out[0, [0, 2]].tolist() == pytest.approx(
        reranker.score(QUERY, INSTRUCTION, [TEXTS[0], TEXTS[2]], [0.9, 0.5])
    )
    assert out[1, [1, 2]].tolist() == pytest.approx(reranker.score(QUERY, None, [TEXTS[1], TEXTS[2]], [0.8, 0.7]))


def test_training_writes_resumable_checkpoints_and_a_fusion_weight(tiny_st_dir, tmp_path):
    from instemb_rag.datasets.reader_records import ReaderRecord, write_reader_records
    from instemb_rag.training.reader import ReaderTrainingArguments, train_reader

    records = [
        ReaderRecord(f"r{n}", kind, "test", QUERY, INSTRUCTION, TEXTS[0], (TEXTS[1], TEXTS[2]), f"g{n}")
        for n, kind in enumerate(["aspect", "plain"] * 20)
    ]
    path = write_reader_records(records, tmp_path / "records.jsonl")
    args = dict(
        records=str(path),
        output_dir=str(tmp_path / "run"),
        base=str(tiny_st_dir),
        lora_rank=2,
        max_length=24,
        inference_max_length=32,
        records_per_step=4,
        max_steps=4,
        save_steps=2,
        validation_share=0.2,
        bf16="no",
    )
    final = train_reader(ReaderTrainingArguments(**args), log=lambda line: None)
    fusion = json.loads((final / "fusion.json").read_text())
    assert fusion["weight"] in [float(weight) for weight in fusion["by_weight"]]
    assert json.loads((final / "config.json").read_text())["max_length"] == 32
    lines = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [line["step"] for line in lines] == [1, 2, 3, 4]
    # Run on to step 6: it resumes at step 4's checkpoint and logs steps 5 and 6 only.
    train_reader(ReaderTrainingArguments(**{**args, "max_steps": 6}), log=lambda line: None)
    lines = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [line["step"] for line in lines] == [1, 2, 3, 4, 5, 6]
    assert sorted(p.name for p in (tmp_path / "run").glob("checkpoint-*")) == ["checkpoint-4", "checkpoint-6"]
