"""`instemb-rag eval --model pasted:FOLDER`: the two-tower anchor (a sentence encoder on both sides,
the instruction pasted before the query) scored on a tiny BEIR folder, recorded under its label."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from helpers import DOCS, QRELS, QUERIES, write_beir_folder
from typer.testing import CliRunner

from instemb_rag.cli import app


def ndcg_at_10(scores: np.ndarray, doc_ids: list[str], relevant: set[str]) -> float:
    ranked = [doc_ids[i] for i in np.argsort(-scores, kind="stable")[:10]]
    dcg = sum(1 / math.log2(rank + 2) for rank, doc_id in enumerate(ranked) if doc_id in relevant)
    return dcg / sum(1 / math.log2(rank + 2) for rank in range(min(len(relevant), 10)))


def test_eval_scores_the_tower_with_the_instruction_pasted(tmp_path, tiny_st_dir, monkeypatch):
    from instemb_rag.encoder.modules.sentence_encoder import SentenceEncoder
    from instemb_rag.eval.data import document_text
    from instemb_rag.teachers import teacher_text

    monkeypatch.setenv("INSTEMB_HOME", str(tmp_path / "home"))
    folder = write_beir_folder(tmp_path / "gear")
    output = tmp_path / "results.json"
    args = ["eval", str(folder), "--model", f"pasted:{tiny_st_dir}", "--max-queries", "0", "--max-docs", "0"]
    result = CliRunner().invoke(app, [*args, "--device", "cpu", "--no-progress", "-o", str(output)], terminal_width=200)
    assert result.exit_code == 0, result.output

    sentence_encoder = SentenceEncoder.load(str(tiny_st_dir))
    saved = json.loads(output.read_text())["results"][0]
    assert saved["task"] == "gear" and saved["kind"] == "retrieval"
    assert saved["encoder"]["label"] == f"{sentence_encoder.name}, instruction pasted" == "model, instruction pasted"
    assert saved["encoder"]["fingerprint"] == f"pasted-{sentence_encoder.fingerprint[:24]}"
    assert saved["counts"] == {"queries": len(QUERIES), "documents": len(DOCS)}

    # The same figures from the sentence encoder by hand: documents as they are, each query with
    # its own instruction pasted in front.
    doc_ids = list(DOCS)
    documents = sentence_encoder.encode([document_text(title, text) for title, text in DOCS.values()])
    queries = sentence_encoder.encode([teacher_text(query["text"], query.get("instruction")) for query in QUERIES])
    expected = [
        ndcg_at_10(documents @ vector, doc_ids, {doc for q, doc, _ in QRELS if q == query["_id"]})
        for query, vector in zip(QUERIES, queries)
    ]
    assert saved["per_item"]["ndcg@10"] == pytest.approx(expected, abs=1e-4)
    assert saved["metrics"]["ndcg@10"] == pytest.approx(float(np.mean(expected)), abs=1e-4)
