"""`instemb-rag index` and `query` with a two-tower checkpoint (issue 44): the document sentence encoder embeds
the chunks, the query LLM the query; the index is keyed on the document sentence encoder, so another query
sentence encoder over it searches the index as it is, and an index of another document space must be rebuilt."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from helpers import index_cli_args
from testing import TENT_DOCS
from typer.testing import CliRunner

from instemb_rag.cli import app
from instemb_rag.cli.index import EXIT_INDEX_FOLDER
from instemb_rag.index.catalog import Catalog
from instemb_rag.index.manifest import MANIFEST_FILE, read_manifest

DOCS = TENT_DOCS
QUERY, INSTRUCTION = "which tent is light ?", "focus on weight"
runner = CliRunner()


def tt_index_args(docs: Path, index_dir: Path, model_dir: Path, *extra: str) -> list[str]:
    """``index`` arguments; the tiny document sentence encoder reads 30 tokens, so chunks overlap by 8, not 32."""
    return index_cli_args(docs, index_dir, model_dir, "--chunk-overlap", "8", *extra)


def write_docs(folder: Path) -> Path:
    for relative, text in DOCS.items():
        (folder / relative).parent.mkdir(parents=True, exist_ok=True)
        (folder / relative).write_text(text)
    return folder


def cli(*args: str):
    result = runner.invoke(app, list(args), env={"COLUMNS": "400"})
    return result.exit_code, result.output


def stored(index_dir: Path) -> tuple[list[str], list[str], np.ndarray]:
    """(sources, chunk texts, vectors) of every chunk, in chunk-id order, from the catalog."""
    catalog = Catalog.open(index_dir)
    try:
        ids, vectors = catalog.vectors()
        rows = catalog.rows(ids.tolist())
    finally:
        catalog.close()
    return [rows[int(i)].source for i in ids], [rows[int(i)].text for i in ids], vectors.copy()


def query_json(index_dir: Path, *extra: str) -> dict:
    code, output = cli(
        "query",
        QUERY,
        "-i",
        INSTRUCTION,
        "-k",
        "10",
        "--json",
        "--index-dir",
        str(index_dir),
        "--device",
        "cpu",
        *extra,
    )
    assert code == 0, output
    return json.loads(output)


@pytest.fixture()
def two_tower_dir(tiny_two_tower, tmp_path) -> Path:
    tiny_two_tower.save(tmp_path / "two_tower")
    return tmp_path / "two_tower"


@pytest.fixture()
def other_query_llm_dir(tiny_encoder, tiny_st_dir, tmp_path) -> Path:
    """Another query LLM (another random head) into the same document sentence encoder."""
    import torch

    from instemb_rag.encoder.composed.encoder import TwoTowerEncoder
    from instemb_rag.encoder.modules.projection import Projection
    from instemb_rag.encoder.modules.sentence_encoder import SentenceEncoder

    torch.manual_seed(7)
    sentence_encoder = SentenceEncoder.load(str(tiny_st_dir))
    head = Projection(tiny_encoder.hidden_size, sentence_encoder.dimension)
    TwoTowerEncoder(tiny_encoder.with_projection(head), sentence_encoder).save(tmp_path / "other_query_llm")
    return tmp_path / "other_query_llm"


def loaded(folder: Path):
    from instemb_rag import InstEmbEncoder

    return InstEmbEncoder.from_pretrained(folder, device="cpu")


def expected_hits(index_dir: Path, encoder) -> list[tuple[str, float]]:
    """Every chunk ranked by the query LLM's vector against the stored vectors."""
    sources, _, vectors = stored(index_dir)
    scores = vectors @ encoder.encode_queries([QUERY], INSTRUCTION)[0]
    return sorted(zip(sources, scores.tolist()), key=lambda item: -item[1])


def check_hits(document: dict, expected: list[tuple[str, float]]) -> None:
    hits = [(hit["source"], hit["score"]) for hit in document["hits"]]
    assert [source for source, _ in hits] == [source for source, _ in expected]
    np.testing.assert_allclose([score for _, score in hits], [score for _, score in expected], atol=1e-4)


def test_index_stores_sentence_encoder_vectors_and_query_ranks_by_the_query_llm(two_tower_dir, tiny_st_dir, tmp_path):
    from instemb_rag.encoder.modules.sentence_encoder import SentenceEncoder

    docs, index_dir = write_docs(tmp_path / "docs"), tmp_path / "index"
    code, output = cli(*tt_index_args(docs, index_dir, two_tower_dir))
    assert code == 0, output

    sources, texts, vectors = stored(index_dir)
    assert sorted(set(sources)) == sorted(DOCS)
    sentence_encoder = SentenceEncoder.load(str(tiny_st_dir))
    np.testing.assert_allclose(vectors, sentence_encoder.encode(texts), atol=1e-5)
    encoder = loaded(two_tower_dir)
    assert not np.allclose(vectors, encoder.encode(texts), atol=1e-3)  # not the LLM sentence encoder's

    manifest = read_manifest(index_dir)
    assert manifest.document_fingerprint == sentence_encoder.fingerprint == encoder.document_fingerprint
    assert manifest.document_side == f"a sentence encoder, two-tower ({encoder.document_side.description})"
    assert manifest.encoder_fingerprint == encoder.fingerprint
    assert manifest.document_instruction is None

    expected = expected_hits(index_dir, encoder)
    check_hits(query_json(index_dir), expected)  # the model the index names
    check_hits(query_json(index_dir, "--model", str(two_tower_dir)), expected)
    # The instruction reaches the query LLM: another instruction, other scores.
    code, output = cli("query", QUERY, "-i", "focus on durability", "--json", "--index-dir", str(index_dir))
    assert code == 0, output
    assert [hit["score"] for hit in json.loads(output)["hits"]] != [score for _, score in expected[:5]]


def test_a_symmetric_index_is_told_to_rebuild_for_a_two_tower_model(tiny_model_dir, two_tower_dir, tmp_path):
    docs, index_dir = write_docs(tmp_path / "docs"), tmp_path / "index"
    code, output = cli(*tt_index_args(docs, index_dir, tiny_model_dir))
    assert code == 0, output
    before = stored(index_dir)[2]

    code, output = cli("query", QUERY, "--index-dir", str(index_dir), "--model", str(two_tower_dir), "--device", "cpu")
    assert code == EXIT_INDEX_FOLDER, output
    assert "--rebuild" in output and "two-tower" in output  # the model in use: documents by its sentence encoder

    code, output = cli(*tt_index_args(docs, index_dir, two_tower_dir))
    assert code == EXIT_INDEX_FOLDER, output
    assert "--rebuild" in output
    np.testing.assert_array_equal(stored(index_dir)[2], before)  # nothing mixed in

    # The command the message gives does rebuild it for the two-tower model.
    code, output = cli(*tt_index_args(docs, index_dir, two_tower_dir, "--rebuild"))
    assert code == 0, output
    assert read_manifest(index_dir).document_fingerprint == loaded(two_tower_dir).document_fingerprint


def test_a_two_tower_index_is_told_to_rebuild_for_a_symmetric_model(tiny_model_dir, two_tower_dir, tmp_path):
    docs, index_dir = write_docs(tmp_path / "docs"), tmp_path / "index"
    assert cli(*tt_index_args(docs, index_dir, two_tower_dir))[0] == 0
    code, output = cli("query", QUERY, "--index-dir", str(index_dir), "--model", str(tiny_model_dir), "--device", "cpu")
    assert code == EXIT_INDEX_FOLDER, output
    assert "--rebuild" in output and "documents embedded by a sentence encoder, two-tower (" in output


def test_another_query_tower_over_the_same_sentence_encoder_searches_without_reembedding(
    two_tower_dir, other_query_llm_dir, tmp_path
):
    docs, index_dir = write_docs(tmp_path / "docs"), tmp_path / "index"
    assert cli(*tt_index_args(docs, index_dir, two_tower_dir))[0] == 0
    _, texts, vectors = stored(index_dir)
    other = loaded(other_query_llm_dir)
    assert other.fingerprint != loaded(two_tower_dir).fingerprint
    assert other.document_fingerprint == loaded(two_tower_dir).document_fingerprint

    # query --model: the other query LLM's ranking over the stored vectors
    check_hits(query_json(index_dir, "--model", str(other_query_llm_dir)), expected_hits(index_dir, other))

    # index --model: the other model takes the index over with nothing re-embedded
    code, output = cli(*tt_index_args(docs, index_dir, other_query_llm_dir))
    assert code == 0, output
    assert re.search(r"files embedded \(new or changed\)\s*│?\s*0\b", output), output
    assert re.search(r"chunks added / in index\s*│?\s*0 / 4\b", output), output
    after_texts, after = stored(index_dir)[1:]
    assert after_texts == texts
    np.testing.assert_array_equal(after, vectors)  # the very bytes the first model stored
    assert read_manifest(index_dir).encoder_fingerprint == other.fingerprint
    check_hits(query_json(index_dir), expected_hits(index_dir, other))  # query's default: the index's model


def test_index_takes_no_document_instruction_and_leaves_no_index(two_tower_dir, tmp_path):
    """`index` has no document-instruction option (documents are embedded without one, and a
    two-tower model's document sentence encoder reads none): asking for one is a usage error, and no index
    folder is started."""
    docs, index_dir = write_docs(tmp_path / "docs"), tmp_path / "index"
    code, output = cli(*tt_index_args(docs, index_dir, two_tower_dir, "--document-instruction", "focus on weight"))
    assert code == 2, output
    assert "--document-instruction" in output
    assert not (index_dir / MANIFEST_FILE).exists()


def test_chunks_are_counted_in_the_towers_tokens_and_fit_its_limit(two_tower_dir, tmp_path):
    docs = tmp_path / "long_docs"
    docs.mkdir()
    words = "the tent is durable nylon and good in rain and wind".split()
    (docs / "long.txt").write_text(" . ".join(" ".join(words) for _ in range(20)) + " .")
    index_dir = tmp_path / "index"
    code, output = cli(*tt_index_args(docs, index_dir, two_tower_dir))
    assert code == 0, output
    sentence_encoder = loaded(two_tower_dir).sentence_encoder
    limit = sentence_encoder.max_length - 2  # the tiny sentence encoder reads 32 tokens, [CLS] and [SEP] among them
    assert read_manifest(index_dir).chunk_size == limit
    _, texts, _ = stored(index_dir)
    assert len(texts) > 1 and all(sentence_encoder.tokens(text) <= sentence_encoder.max_length for text in texts)
    # A chunk size past what the document sentence encoder reads is refused, and the index is kept.
    code, output = cli(*tt_index_args(docs, tmp_path / "other", two_tower_dir), "--chunk-size", str(limit + 1))
    assert code != 0 and f"--chunk-size {limit}" in " ".join(output.split())
    assert not (tmp_path / "other" / MANIFEST_FILE).exists()
