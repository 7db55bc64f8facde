"""`instemb-rag query` and `Index` with an instruction-effect model (issue 56): documents stored as
the two-space layout [LLM; sentence encoder] / sqrt 2, a query [s h(effect); M(i + q)] normalised;
`--instruction-strength` sets s per query (nothing re-indexed), `--explain` splits each score into
the plain score and the instruction's contribution, and a model without the knob refuses it,
saying what the model is (as `--llm-weight` is refused)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from helpers import index_cli_args
from testing import TENT_DOCS
from typer.testing import CliRunner

from instemb_rag.cli import app
from instemb_rag.cli.index import EXIT_BAD_INPUT
from instemb_rag.cli.query import EXPLAINED_EFFECT
from instemb_rag.index.catalog import Catalog

pytest.importorskip("sentence_transformers")

DOCS = TENT_DOCS
QUERY, INSTRUCTION = "which tent is light ?", "focus on weight"
DEFAULT_STRENGTH = 2.0  # the folder's own
runner = CliRunner()


def cli(*args: str):
    result = runner.invoke(app, list(args), env={"COLUMNS": "400"})
    return result.exit_code, result.output


def write_docs(folder: Path) -> Path:
    for relative, text in DOCS.items():
        (folder / relative).parent.mkdir(parents=True, exist_ok=True)
        (folder / relative).write_text(text)
    return folder


def build_index(docs: Path, index_dir: Path, model_dir: Path) -> Path:
    code, output = cli(*index_cli_args(docs, index_dir, model_dir, "--chunk-overlap", "8"))
    assert code == 0, output
    return index_dir


def query_json(index_dir: Path, *extra: str) -> dict:
    code, output = cli("query", QUERY, "-i", INSTRUCTION, "-k", "10", "--json", "--index-dir", str(index_dir), *extra)
    assert code == 0, output
    return json.loads(output)


def loaded(folder: Path):
    from instemb_rag import InstEmbEncoder

    return InstEmbEncoder.from_pretrained(folder, device="cpu")


@pytest.fixture(scope="module")
def effect_dir(tiny_model_dir, tiny_st_dir, tmp_path_factory) -> Path:
    from instemb_rag.encoder.load import untrained_effect

    folder = tmp_path_factory.mktemp("effect") / "model"
    encoder = untrained_effect(
        str(tiny_model_dir), str(tiny_st_dir), instruction_strength=DEFAULT_STRENGTH, device="cpu", lookahead_length=2
    )
    encoder.save(folder)
    return folder


@pytest.fixture(scope="module")
def effect_index(effect_dir, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("effect_index")
    return build_index(write_docs(root / "docs"), root / "index", effect_dir)


def expected_scores(index_dir: Path, encoder, strength: float | None) -> dict[str, float]:
    """source -> (cos_M(i + q, d) + < s effect, D(d) >) / (sqrt 2 |[s effect; M(i + q)]|), from the
    stored halves and the query's."""
    catalog = Catalog.open(index_dir)
    try:
        ids, vectors = catalog.vectors()
        rows = catalog.rows(ids.tolist())
    finally:
        catalog.close()
    split = encoder.llm_dimension
    llm_docs, sentence_encoder_docs = vectors[:, :split] * math.sqrt(2), vectors[:, split:] * math.sqrt(2)
    effect_vector, sentence_encoder_vectors, _ = encoder.query_by_space([QUERY], [INSTRUCTION], strength)
    combined = sentence_encoder_docs @ sentence_encoder_vectors[0] + llm_docs @ effect_vector[0]
    scale = 1 / (math.sqrt(2) * math.sqrt(1 + float(effect_vector[0] @ effect_vector[0])))
    return {rows[int(i)].source: float(score) * scale for i, score in zip(ids, combined)}


def test_instruction_strength_sets_how_much_the_instruction_moves_the_scores(effect_dir, effect_index):
    encoder = loaded(effect_dir)
    contributions = {}
    for strength in (None, 0.0, 1.0, 5.0):
        extra = () if strength is None else ("--instruction-strength", str(strength))
        document = query_json(effect_index, *extra, "--explain")
        assert document.get("instruction_strength") == strength  # only when the query gave one
        expected = expected_scores(effect_index, encoder, strength)
        hits = document["hits"]
        assert sorted(hit["source"] for hit in hits) == sorted(DOCS)
        np.testing.assert_allclose([hit["score"] for hit in hits], [expected[hit["source"]] for hit in hits], atol=1e-4)
        assert [hit["score"] for hit in hits] == sorted((hit["score"] for hit in hits), reverse=True)
        used = DEFAULT_STRENGTH if strength is None else strength
        for hit in hits:  # --explain: the parts add up to what ranks, and scale to the search's score
            parts = hit["explain"]
            assert set(parts) == {
                "plain",
                "instruction",
                "instruction_strength",
                "effective_strength",
                "combined",
                "score",
            }
            assert parts["instruction_strength"] == pytest.approx(used)  # untrained: the effect's gain is 1
            assert parts["combined"] == pytest.approx(parts["plain"] + parts["instruction"], abs=1e-6)
            assert parts["score"] == pytest.approx(hit["score"], abs=1e-4)
        assert document["explain"] == {"spaces": 2, "score": EXPLAINED_EFFECT}
        contributions[used] = {hit["source"]: hit["explain"] for hit in hits}
    # The plain score is the sentence encoder's, whatever the strength; the instruction's contribution
    # grows with it, and strength 0 is plain search.
    for source, zero in contributions[0.0].items():
        assert zero["instruction"] == 0.0 and zero["score"] == pytest.approx(zero["plain"] / math.sqrt(2), abs=1e-5)
        for strength in (1.0, DEFAULT_STRENGTH, 5.0):
            parts = contributions[strength][source]
            assert parts["plain"] == pytest.approx(zero["plain"], abs=1e-5)
            one = contributions[1.0][source]["instruction"]
            assert parts["instruction"] == pytest.approx(strength * one, rel=1e-3, abs=1e-6)
    assert any(abs(contributions[5.0][source]["instruction"]) > 1e-4 for source in DOCS)


def test_explain_prints_the_plain_score_and_the_instructions_contribution(effect_index):
    code, output = cli(
        "query",
        QUERY,
        "-i",
        INSTRUCTION,
        "--index-dir",
        str(effect_index),
        "--explain",
        "--instruction-strength",
        "1.5",
    )
    assert code == 0, output
    for heading in ("plain cos", "instruction", "strength", "combined"):
        assert heading in output
    assert "instruction strength 1.5" in output and "1.5000" in output
    assert "instruction effect: combined = plain" in " ".join(output.split())


def test_an_out_of_range_strength_is_a_usage_error(effect_index):
    for bad in ("-1", "10.5"):
        code, output = cli("query", QUERY, "--index-dir", str(effect_index), "--instruction-strength", bad)
        assert code == 2 and "--instruction-strength" in output


def test_the_python_api_takes_the_strength_per_call(effect_dir, effect_index):
    from instemb_rag.index import BadInputError, Index

    encoder = loaded(effect_dir)
    with Index.open(effect_index, encoder=encoder) as index:
        assert index.query_knob == "instruction_strength" and not index.two_spaces
        hits = index.search(QUERY, INSTRUCTION, k=4, instruction_strength=3.0)
        expected = expected_scores(effect_index, encoder, 3.0)
        np.testing.assert_allclose([hit.score for hit in hits], [expected[hit.source] for hit in hits], atol=1e-4)
        rows = index.explain(QUERY, INSTRUCTION, hits, instruction_strength=3.0)
        assert [row["score"] for row in rows] == pytest.approx([hit.score for hit in hits], abs=1e-4)
        assert all(row["instruction_strength"] == pytest.approx(3.0) for row in rows)
        # without an instruction the query is the sentence encoder's alone: nothing to add
        plain = index.explain(QUERY, None, hits, instruction_strength=3.0)
        assert all(row["instruction"] == 0.0 for row in plain)
        with pytest.raises(BadInputError, match="instruction_strength applies when the index embeds the query text"):
            index.search(QUERY, INSTRUCTION, query_vector=encoder.encode_queries([QUERY])[0], instruction_strength=1.0)
        with pytest.raises(BadInputError, match="an instruction-effect model, whose query-time knob is instruction"):
            index.search(QUERY, INSTRUCTION, llm_weight=0.5)
        with pytest.raises(Exception, match="instruction_strength=12"):
            index.search(QUERY, INSTRUCTION, instruction_strength=12)


def test_the_llm_weight_is_refused_naming_the_models_own_knob(effect_index):
    code, output = cli("query", QUERY, "--index-dir", str(effect_index), "--llm-weight", "0.3")
    flat = " ".join(output.split())
    assert code == EXIT_BAD_INPUT, output
    assert "an instruction-effect model, whose query-time knob is instruction_strength (--instruction-strength)" in flat


def test_a_one_space_model_refuses_the_strength(tiny_model_dir, tmp_path):
    index_dir = build_index(write_docs(tmp_path / "docs"), tmp_path / "index", tiny_model_dir)
    code, output = cli("query", QUERY, "--index-dir", str(index_dir), "--instruction-strength", "1")
    flat = " ".join(output.split())
    assert code == EXIT_BAD_INPUT, output
    assert "instruction_strength (--instruction-strength) sets how much the instruction moves" in flat
    assert "not an instruction-effect model: it ranks by one space" in flat and "Drop the option" in flat


def test_a_two_space_index_refuses_the_strength_and_an_effect_model_searches_it(
    tiny_model_dir, tiny_st_dir, effect_dir, tmp_path
):
    """The same document side: the effect model searches a two-space model's index as it is; the
    two-space model itself has llm_weight, not the strength."""
    from instemb_rag.encoder.load import untrained_two_spaces

    untrained_two_spaces(str(tiny_model_dir), str(tiny_st_dir), device="cpu", lookahead_length=2).save(tmp_path / "mix")
    index_dir = build_index(write_docs(tmp_path / "docs"), tmp_path / "index", tmp_path / "mix")
    code, output = cli("query", QUERY, "--index-dir", str(index_dir), "--instruction-strength", "1", "--explain")
    flat = " ".join(output.split())
    assert code == EXIT_BAD_INPUT, output
    assert "a two-space model, whose query-time knob is llm_weight (--llm-weight)" in flat

    document = query_json(index_dir, "--model", str(effect_dir), "--instruction-strength", "1", "--explain")
    expected = expected_scores(index_dir, loaded(effect_dir), 1.0)
    np.testing.assert_allclose(
        [hit["score"] for hit in document["hits"]], [expected[hit["source"]] for hit in document["hits"]], atol=1e-4
    )
    assert all("plain" in hit["explain"] for hit in document["hits"])
