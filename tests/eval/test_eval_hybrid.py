"""`eval --hybrid`: tasks scored the way `Index.search(..., hybrid=...)` ranks (tiny model)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers import index_cli_args, write_beir_folder
from typer.testing import CliRunner

from instemb_rag.cli import app
from instemb_rag.eval.hybrid import HybridSettings, fused_matrix, lexical_matrix
from instemb_rag.index import Index

TEXTS = {
    "ridge.txt": "the tent is durable nylon . good in rain and wind .",
    "light.txt": "a light tent . packed size 30 cm . weight 1 kg .",
    "stove.txt": "the stove is light . fuel gas burner .",
    "pack.txt": "the backpack strap and frame are heavy but durable .",
    "lamp.txt": "kerosene lamps smell , but kerosene burns in the cold .",
}


@pytest.mark.parametrize(("mode", "weight"), [("rrf", 0.5), ("z", 0.3), ("z", 1.0)])
def test_eval_fusion_ranks_as_index_search_does(tiny_model_dir, tmp_path, mode, weight):
    from instemb_rag import InstEmbEncoder

    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in TEXTS.items():
        (docs / name).write_text(text)
    result = CliRunner().invoke(app, index_cli_args(docs, tmp_path / "index", tiny_model_dir))
    assert result.exit_code == 0, result.output
    encoder = InstEmbEncoder.from_pretrained(tiny_model_dir, device="cpu")
    query, instruction = "durable light tent", "focus on the weight of the gear"
    settings = HybridSettings(mode, weight)
    texts = list(TEXTS.values())
    dense = encoder.encode_queries([query], instruction) @ encoder.encode_documents(texts).T
    scores = fused_matrix(settings, dense, lexical_matrix(settings, texts, [query], instruction))[0]
    with Index.open(tmp_path / "index", encoder=encoder) as index:
        hits = index.search(query, instruction, k=len(TEXTS), hybrid=mode, hybrid_weight=weight)
    names = list(TEXTS)
    assert [hit.source for hit in hits] == [names[i] for i in np.argsort(-scores, kind="stable")][: len(hits)]


def test_lexical_side_alone_finds_the_shared_word_and_weight_zero_is_dense(tiny_model_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("INSTEMB_HOME", str(tmp_path / "home"))
    docs = {"d1": ("", "kerosene lamp burns"), "d2": ("", "nylon tent in rain"), "d3": ("", "gas stove burner")}
    queries = [{"_id": "q1", "text": "which kerosene ?"}, {"_id": "q2", "text": "a tent for rain"}]
    folder = write_beir_folder(tmp_path / "gear", docs, queries, [("q1", "d1", 1), ("q2", "d2", 1)])
    base = ["eval", str(folder), "--model", str(tiny_model_dir), "--device", "cpu", "--no-progress"]

    def run(*extra: str) -> dict:
        output = tmp_path / f"{len(extra)}-{'-'.join(extra)}.json"
        result = CliRunner().invoke(app, [*base, *extra, "-o", str(output)])
        assert result.exit_code == 0, result.output
        return json.loads(output.read_text())["results"][0]

    dense = run()
    lexical = run("--hybrid", "rrf", "--hybrid-weight", "1.0")
    assert lexical["metrics"]["ndcg@10"] == 1.0
    assert lexical["encoder"]["hybrid"]["weight"] == 1.0 and lexical["limits"] == dense["limits"]
    assert run("--hybrid", "z", "--hybrid-weight", "0")["per_item"] == dense["per_item"]
    bad = CliRunner().invoke(app, [*base, "--hybrid", "rrf", "--lexical-engine", "lucene"])
    assert bad.exit_code == 2 and "lucene" in bad.output


def test_facet_groups_hybrid_scores_fused_dense_and_lexical_from_one_dense_pass(tiny_model_dir, tmp_path):
    from instemb_rag.datasets.facet_groups import DEV_GROUPS

    groups = tmp_path / "groups.jsonl"
    groups.write_text("".join(DEV_GROUPS.read_text().splitlines(keepends=True)[:3]))
    output = tmp_path / "facets.json"
    args = ["eval", "facet-groups", "--groups", str(groups), "--model", str(tiny_model_dir), "--device", "cpu"]
    result = CliRunner().invoke(app, [*args, "--no-progress", "--hybrid", "rrf", "-o", str(output)])
    assert result.exit_code == 0, result.output
    saved = json.loads(output.read_text())
    fused, dense, lexical = saved["results"]
    assert fused["encoder"]["hybrid"]["mode"] == "rrf" and "hybrid" not in dense["encoder"]
    assert lexical["encoder"]["hybrid"]["weight"] == 1.0
    pairs = [(c["candidate"], c["baseline"]) for c in saved["facet_groups"]["comparisons"]]
    assert pairs == [
        (fused["encoder"]["label"], dense["encoder"]["label"]),
        (fused["encoder"]["label"], lexical["encoder"]["label"]),
    ]
