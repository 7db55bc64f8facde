"""Loaders, the embedding cache and the task runner on small data written by the tests."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest
from helpers import DOCS, QRELS, QUERIES, write_beir_folder  # noqa: F401

from instemb_rag.eval import EmbeddingCache, EvalDataError, evaluate, load_beir, load_stance, load_sts


class CountingEncoder:
    """Delegates to a real encoder and counts document-embedding calls (to observe the cache)."""

    def __init__(self, encoder):
        self.encoder = encoder
        self.document_calls = 0

    def __getattr__(self, name):
        return getattr(self.encoder, name)

    def encode_documents(self, documents, instruction=None, **kwargs):
        self.document_calls += 1
        return self.encoder.encode_documents(documents, instruction=instruction, **kwargs)


class BagOfWordsEncoder:
    """A transparent lexical encoder (hashed word counts over text + instruction).

    Its rankings are predictable, which lets the stance test check the direction of p-MRR.
    """

    dimension = 256
    fingerprint = "bag-of-words-v1"

    def _vector(self, text: str) -> np.ndarray:
        vector = np.zeros(self.dimension, dtype=np.float32)
        for word in text.lower().replace(".", " ").split():
            vector[int(hashlib.md5(word.encode()).hexdigest(), 16) % self.dimension] += 1
        return vector / max(np.linalg.norm(vector), 1e-9)

    def encode(self, texts, instructions=None, **kwargs):
        if instructions is None or isinstance(instructions, str):
            instructions = [instructions] * len(texts)
        return np.stack([self._vector(f"{t} {i or ''}") for t, i in zip(texts, instructions)])

    def encode_queries(self, queries, instructions=None, **kwargs):
        return self.encode(queries, instructions)

    def encode_documents(self, documents, instruction=None, **kwargs):
        return self.encode(documents, instruction)


# ----------------------------------------------------------------------------- loaders
def test_beir_loader_reads_fields_and_merges_instructions(tmp_path):
    data = load_beir(write_beir_folder(tmp_path / "set"), instruction="global instruction")
    assert data.corpus["d1"] == "tent\nthe tent is light and durable in rain and wind"
    assert data.corpus["d4"] == "a cold night with poor water and bad fuel"  # empty title left out
    assert data.qrels["q1"] == {"d1": 1, "d5": 1}
    assert data.instruction_for("q1") == "focus on durability"  # own field wins
    assert data.instruction_for("q2") == "global instruction"


def test_beir_loader_names_file_and_line_of_bad_json(tmp_path):
    folder = write_beir_folder(tmp_path / "set")
    with (folder / "queries.jsonl").open("a") as handle:
        handle.write("{not json\n")
    with pytest.raises(EvalDataError, match=r"queries\.jsonl:4: not valid JSON"):
        load_beir(folder)


def test_beir_loader_names_missing_field(tmp_path):
    queries = QUERIES + [{"_id": "q4"}]
    folder = write_beir_folder(tmp_path / "set", queries=queries)
    with pytest.raises(EvalDataError, match=r"queries\.jsonl:4: field 'text'"):
        load_beir(folder)


def test_qrels_errors_name_line(tmp_path):
    folder = write_beir_folder(tmp_path / "set")
    (folder / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\tyes\n")
    with pytest.raises(EvalDataError, match=r"qrels\.tsv:2: score 'yes'"):
        load_beir(folder)
    (folder / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\n")
    with pytest.raises(EvalDataError, match=r"qrels\.tsv:2: expected 3"):
        load_beir(folder)


def test_qrels_judging_unknown_documents_is_an_error(tmp_path):
    folder = write_beir_folder(tmp_path / "set", qrels=QRELS + [("q2", "d99", 1)])
    with pytest.raises(EvalDataError, match="d99"):
        load_beir(folder)


def test_stance_and_sts_loaders_validate(tmp_path):
    stance = tmp_path / "stance.jsonl"
    record = {
        "claim_id": "1",
        "claim": "c",
        "doc_id": "d1",
        "label": "SUPPORT",
        "instruction_match": "Find support.",
        "instruction_mismatch": "Find support.",
    }
    stance.write_text(json.dumps(record) + "\n")
    with pytest.raises(
        EvalDataError, match=r"stance\.jsonl:1: instruction_match and instruction_mismatch are identical"
    ):
        load_stance(stance)
    sts = tmp_path / "sts.jsonl"
    sts.write_text(
        json.dumps({"sentence1": "a", "sentence2": "b", "score": 1})
        + "\n"
        + json.dumps({"sentence1": "a", "sentence2": "b", "score": "high"})
        + "\n"
    )
    with pytest.raises(EvalDataError, match=r"sts\.jsonl:2: field 'score' must be a number"):
        load_sts(sts)


def test_real_stance_file_loads():
    from testing import shared_data_or_skip

    records = load_stance(shared_data_or_skip("scifact") / "stance.jsonl")
    assert len(records) == 564
    assert {record.label for record in records} == {"SUPPORT", "CONTRADICT"}


# ----------------------------------------------------------------------------- cache
def test_corpus_cache_is_reused_and_invalidated_when_corpus_changes(tmp_path, tiny_encoder):
    folder = write_beir_folder(tmp_path / "set")
    cache = EmbeddingCache(tmp_path / "cache")
    encoder = CountingEncoder(tiny_encoder)

    first = evaluate(encoder, str(folder), cache=cache)
    second = evaluate(encoder, str(folder), cache=cache)
    assert encoder.document_calls == 1, "second run must read corpus embeddings from the cache"
    assert (first["corpus_from_cache"], second["corpus_from_cache"]) == (False, True)
    assert second["metrics"] == pytest.approx(first["metrics"])
    stored = list((tmp_path / "cache" / tiny_encoder.fingerprint).iterdir())
    assert sorted(p.suffix for p in stored) == [".json", ".npy"]  # no temporary files left behind

    changed = dict(DOCS, d6=("review", "a poor review of a cold tent"))
    write_beir_folder(folder, docs=changed)
    third = evaluate(encoder, str(folder), cache=cache)
    assert encoder.document_calls == 2 and third["corpus_from_cache"] is False


def test_damaged_cache_entry_is_recomputed_not_trusted(tmp_path, tiny_encoder):
    folder = write_beir_folder(tmp_path / "set")
    cache = EmbeddingCache(tmp_path / "cache")
    encoder = CountingEncoder(tiny_encoder)
    evaluate(encoder, str(folder), cache=cache)
    matrix_file = next((tmp_path / "cache" / tiny_encoder.fingerprint).glob("*.npy"))
    matrix_file.write_bytes(b"garbage")
    result = evaluate(encoder, str(folder), cache=cache)
    assert encoder.document_calls == 2 and result["corpus_from_cache"] is False
    assert np.load(matrix_file).shape == (len(DOCS), tiny_encoder.dimension)


# ----------------------------------------------------------------------------- runner
def test_subsampling_keeps_judged_documents_and_says_so(tmp_path, tiny_encoder):
    folder = write_beir_folder(tmp_path / "set")
    result = evaluate(tiny_encoder, str(folder), max_queries=2, max_docs=4, seed=3, cache=False)
    assert result["counts"]["queries"] == 2
    assert result["counts"]["documents"] == 4
    assert any("kept all" in note and "judged" in note for note in result["notes"])
    assert 0.0 <= result["metrics"]["ndcg@10"] <= 1.0
    json.dumps(result)  # the result structure is JSON-able as is


STANCE_RECORDS = [
    {
        "claim_id": "1",
        "claim": "tents",
        "doc_id": "s1",
        "label": "SUPPORT",
        "instruction_match": "support",
        "instruction_mismatch": "contradict",
    },
    {
        "claim_id": "2",
        "claim": "stoves",
        "doc_id": "s2",
        "label": "CONTRADICT",
        "instruction_match": "contradict",
        "instruction_mismatch": "support",
    },
]


def write_stance_folder(scifact, docs: dict, records: list[dict] = STANCE_RECORDS) -> None:
    """A SciFact-like folder: the abstracts in ``docs`` and a stance.jsonl of ``records``."""
    write_beir_folder(scifact, docs=docs, queries=[{"_id": "q", "text": "tents"}], qrels=[("q", "s1", 1)])
    (scifact / "stance.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


def test_stance_task_direction_with_a_lexical_encoder(tmp_path):
    """Each target abstract has a twin carrying the opposite stance word, so the instruction
    decides which of the two ranks first: p-MRR must be exactly +0.5 (rank 1 -> 2) and flip to
    -0.5 when the instructions are swapped."""
    scifact = tmp_path / "scifact"
    docs = {
        "s1": ("", "tents support"),
        "s1-twin": ("", "tents contradict"),
        "s2": ("", "stoves contradict"),
        "s2-twin": ("", "stoves support"),
        **{f"x{i}": ("", f"filler abstract {i} about rain") for i in range(6)},
    }
    write_stance_folder(scifact, docs)
    result = evaluate(BagOfWordsEncoder(), "scifact-stance", data_root=tmp_path, cache=False)
    assert result["metrics"]["p-mrr"] == pytest.approx(0.5)
    assert result["metrics"]["pairwise_accuracy"] == 1.0
    assert result["metrics"]["pairwise_accuracy_support"] == result["metrics"]["pairwise_accuracy_contradict"] == 1.0
    assert (result["metrics"]["mrr_matching"], result["metrics"]["mrr_mismatching"]) == (1.0, 0.5)

    swapped = [
        dict(r, instruction_match=r["instruction_mismatch"], instruction_mismatch=r["instruction_match"])
        for r in STANCE_RECORDS
    ]
    write_stance_folder(scifact, docs, swapped)
    flipped = evaluate(BagOfWordsEncoder(), "scifact-stance", data_root=tmp_path, cache=False)
    assert flipped["metrics"]["p-mrr"] == pytest.approx(-0.5)
    assert flipped["metrics"]["pairwise_accuracy"] == 0.0
    assert flipped["metrics"]["pairwise_accuracy_support"] == flipped["metrics"]["pairwise_accuracy_contradict"] == 0.0


def test_stance_accuracy_per_label_exposes_a_wording_bias(tmp_path):
    """Both abstracts carry the word "support", so the lexical encoder prefers the support
    instruction whatever the label: right on SUPPORT, wrong on CONTRADICT, 0.5 overall."""
    scifact = tmp_path / "scifact"
    docs = {
        "s1": ("", "tents support"),
        "s2": ("", "stoves support"),
        **{f"x{i}": ("", f"filler abstract {i} about rain") for i in range(4)},
    }
    write_stance_folder(scifact, docs)
    metrics = evaluate(BagOfWordsEncoder(), "scifact-stance", data_root=tmp_path, cache=False)["metrics"]
    assert metrics["pairwise_accuracy"] == 0.5
    assert (metrics["pairwise_accuracy_support"], metrics["pairwise_accuracy_contradict"]) == (1.0, 0.0)


def test_unknown_task_and_missing_data_give_clear_errors(tmp_path, tiny_encoder):
    with pytest.raises(EvalDataError, match="Unknown task 'nope'"):
        evaluate(tiny_encoder, "nope")
    with pytest.raises(EvalDataError, match="needs .*vaswani.*absent"):
        evaluate(tiny_encoder, "vaswani", data_root=tmp_path)


@pytest.mark.slow
def test_default_model_on_real_scifact_stance_and_stsb(default_encoder, tmp_path):
    from testing import shared_data_or_skip

    root = shared_data_or_skip("scifact").parent
    stance = evaluate(
        default_encoder, "scifact-stance", max_queries=2, max_docs=3, data_root=root, cache=EmbeddingCache(tmp_path)
    )
    assert -1.0 <= stance["metrics"]["p-mrr"] <= 1.0
    assert 0.0 <= stance["metrics"]["pairwise_accuracy"] <= 1.0
    sts = evaluate(default_encoder, "stsb", max_queries=8, data_root=root)
    assert -1.0 <= sts["metrics"]["spearman"] <= 1.0 and sts["counts"]["pairs"] == 8
