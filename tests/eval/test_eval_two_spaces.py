"""`instemb-rag eval --model FOLDER` on a two-space folder (`instemb-rag compose`): scored as
``w cos_LLM + (1 - w) cos_sentence`` on a tiny BEIR folder, recorded with the model's fingerprint,
and its corpus cache keyed on the document side (another weight reuses the stored documents)."""

from __future__ import annotations

import json
import math

import numpy as np
from helpers import write_beir_folder
from typer.testing import CliRunner

from instemb_rag.cli import app


def ndcg_at_10(scores: np.ndarray, doc_ids: list[str], relevant: set[str]) -> float:
    ranked = [doc_ids[i] for i in np.argsort(-scores, kind="stable")[:10]]
    dcg = sum(1 / math.log2(rank + 2) for rank, doc_id in enumerate(ranked) if doc_id in relevant)
    return dcg / sum(1 / math.log2(rank + 2) for rank in range(min(len(relevant), 10)))


def compose(folder, tiny_model_dir, tiny_st_dir, weight: float):
    args = ["compose", "--out", str(folder), "--documents-llm", str(tiny_model_dir), "--tower", str(tiny_st_dir)]
    result = CliRunner().invoke(app, [*args, "--llm-weight", str(weight)], terminal_width=200)
    assert result.exit_code == 0, result.output
    return folder


def test_eval_scores_a_composed_two_space_folder_by_the_weighted_cosines(
    tmp_path, tiny_model_dir, tiny_st_dir, monkeypatch
):
    from instemb_rag.encoder import InstEmbEncoder
    from instemb_rag.encoder.modules.sentence_encoder import SentenceEncoder
    from instemb_rag.eval.data import load_beir

    monkeypatch.setenv("INSTEMB_HOME", str(tmp_path / "home"))
    beir = write_beir_folder(tmp_path / "gear")
    model = compose(tmp_path / "mix", tiny_model_dir, tiny_st_dir, 0.7)
    output = tmp_path / "results.json"
    args = ["eval", str(beir), "--model", str(model), "--max-queries", "0", "--max-docs", "0"]
    result = CliRunner().invoke(app, [*args, "--device", "cpu", "--no-progress", "-o", str(output)], terminal_width=200)
    assert result.exit_code == 0, result.output
    saved = json.loads(output.read_text())["results"][0]
    encoder = InstEmbEncoder.from_pretrained(model, device="cpu")
    assert saved["encoder"]["fingerprint"] == encoder.fingerprint

    # By hand: the two parts, each on its own, mixed at 0.7.
    llm = InstEmbEncoder.from_pretrained(tiny_model_dir, device="cpu")
    sentence_encoder = SentenceEncoder.load(str(tiny_st_dir))
    data = load_beir(beir, instruction=None, name="gear")
    doc_ids = list(data.corpus)
    documents = [data.corpus[i] for i in doc_ids]
    figures = []
    for query_id, text in data.queries.items():
        instruction = data.instruction_for(query_id)
        llm_scores = llm.encode_documents(documents) @ llm.encode_queries([text], instruction)[0]
        sentence_encoder_scores = (
            sentence_encoder.encode(documents) @ sentence_encoder.anchor_vectors([text], [instruction])[0]
        )
        figures.append(ndcg_at_10(0.7 * llm_scores + 0.3 * sentence_encoder_scores, doc_ids, set(data.qrels[query_id])))
    assert math.isclose(saved["metrics"]["ndcg@10"], float(np.mean(figures)), abs_tol=1e-4)


def test_compose_from_a_folder_sets_the_weight_without_touching_the_documents(tmp_path, tiny_model_dir, tiny_st_dir):
    from instemb_rag.encoder import InstEmbEncoder

    first = compose(tmp_path / "a", tiny_model_dir, tiny_st_dir, 0.5)
    args = ["compose", "--from", str(first), "--llm-weight", "0.85", "--no-gate", "--out", str(tmp_path / "b")]
    result = CliRunner().invoke(app, args, terminal_width=200)
    assert result.exit_code == 0, result.output
    a = InstEmbEncoder.from_pretrained(first, device="cpu")
    b = InstEmbEncoder.from_pretrained(tmp_path / "b", device="cpu")
    assert b.llm_weight == 0.85 and a.llm_weight == 0.5
    assert a.document_fingerprint == b.document_fingerprint  # the weight is a query-side setting
    documents = ["the tent keeps out rain", "the stove boils water"]
    np.testing.assert_allclose(a.encode_documents(documents), b.encode_documents(documents), atol=1e-6)
    bad = CliRunner().invoke(app, ["compose", "--out", str(tmp_path / "c"), "--llm-weight", "1"], terminal_width=200)
    assert bad.exit_code == 2 and "strictly between 0 and 1" in bad.output
