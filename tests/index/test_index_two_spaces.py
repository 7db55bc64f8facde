"""`instemb-rag index` and `query` with a two-space model (issue 50): documents stored as
[LLM; sentence encoder] / sqrt 2, queries mixed by the LLM weight; the index keyed on the document
side (its fingerprint recorded for every encoder), chunks sized by its most restrictive part, the
weight a query-time knob (`--llm-weight`), each space's score shown by `--explain`, and an index
of another document side (an older default) told to rebuild with the command."""

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
from instemb_rag.cli.index import EXIT_BAD_INPUT, EXIT_INDEX_FOLDER
from instemb_rag.encoder.composed.encoder import two_spaces_scale
from instemb_rag.index.catalog import Catalog
from instemb_rag.index.manifest import MANIFEST_FILE, read_manifest

pytest.importorskip("sentence_transformers")

DOCS = TENT_DOCS
QUERY, INSTRUCTION = "which tent is light ?", "focus on weight"
runner = CliRunner()


def cli(*args: str):
    result = runner.invoke(app, list(args), env={"COLUMNS": "400"})
    return result.exit_code, result.output


def write_docs(folder: Path) -> Path:
    for relative, text in DOCS.items():
        (folder / relative).parent.mkdir(parents=True, exist_ok=True)
        (folder / relative).write_text(text)
    return folder


def index_args(docs: Path, index_dir: Path, model_dir: Path, *extra: str) -> list[str]:
    """The tiny sentence encoder reads 30 tokens of text: chunks overlap by 8, not the default 32."""
    return index_cli_args(docs, index_dir, model_dir, "--chunk-overlap", "8", *extra)


def stored(index_dir: Path) -> tuple[list[str], list[str], np.ndarray]:
    catalog = Catalog.open(index_dir)
    try:
        ids, vectors = catalog.vectors()
        rows = catalog.rows(ids.tolist())
    finally:
        catalog.close()
    return [rows[int(i)].source for i in ids], [rows[int(i)].text for i in ids], vectors.copy()


def query_json(index_dir: Path, *extra: str) -> dict:
    code, output = cli("query", QUERY, "-i", INSTRUCTION, "-k", "10", "--json", "--index-dir", str(index_dir), *extra)
    assert code == 0, output
    return json.loads(output)


def loaded(folder: Path):
    from instemb_rag import InstEmbEncoder

    return InstEmbEncoder.from_pretrained(folder, device="cpu")


@pytest.fixture(scope="module")
def two_space_dir(tiny_model_dir, tiny_st_dir, tmp_path_factory) -> Path:
    from instemb_rag.encoder.load import untrained_two_spaces

    folder = tmp_path_factory.mktemp("two_spaces") / "model"
    encoder = untrained_two_spaces(
        str(tiny_model_dir), str(tiny_st_dir), llm_weight=0.6, device="cpu", lookahead_length=2
    )
    encoder.save(folder)
    return folder


@pytest.fixture(scope="module")
def two_space_index(two_space_dir, tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("two_space_index")
    docs, index_dir = write_docs(root / "docs"), root / "index"
    code, output = cli(*index_args(docs, index_dir, two_space_dir))
    assert code == 0, output
    return docs, index_dir


def expected_scores(index_dir: Path, encoder, llm_weight: float) -> dict[str, float]:
    """source -> (w cos(a, A) + (1 - w) cos(b, B)) * two_spaces_scale(w) (the unit query's cosine), from the
    stored halves and the query halves."""

    sources, _, vectors = stored(index_dir)
    split = encoder.llm_dimension
    llm_docs, sentence_encoder_docs = vectors[:, :split] * math.sqrt(2), vectors[:, split:] * math.sqrt(2)
    llm_vectors, sentence_encoder_vectors, _ = encoder.query_by_space([QUERY], [INSTRUCTION])
    scores = (
        llm_weight * llm_docs @ llm_vectors[0] + (1 - llm_weight) * sentence_encoder_docs @ sentence_encoder_vectors[0]
    )
    return dict(zip(sources, (scores * two_spaces_scale(llm_weight)).tolist()))


def test_a_two_space_index_records_its_document_side_and_reopens_without_refusal(two_space_dir, two_space_index):
    docs, index_dir = two_space_index
    encoder = loaded(two_space_dir)
    side = encoder.document_side
    sources, texts, vectors = stored(index_dir)
    assert sorted(set(sources)) == sorted(DOCS)
    np.testing.assert_allclose(vectors, encoder.encode_documents(texts), atol=1e-5)  # [A; B] / sqrt 2

    # The index's own model searches it, twice (the second reopens it), and --model the same folder too.
    first = query_json(index_dir)
    assert query_json(index_dir) == first
    assert query_json(index_dir, "--model", str(two_space_dir))["hits"] == first["hits"]
    expected = expected_scores(index_dir, encoder, encoder.llm_weight)  # no gate: the configured 0.6
    assert [hit["source"] for hit in first["hits"]] == sorted(expected, key=lambda source: -expected[source])
    np.testing.assert_allclose([hit["score"] for hit in first["hits"]], sorted(expected.values())[::-1], atol=1e-4)

    manifest = read_manifest(index_dir)
    assert manifest.document_fingerprint == side.fingerprint == encoder.document_fingerprint
    assert manifest.document_fingerprint != encoder.fingerprint  # the query side is not in it
    assert manifest.document_side == f"two spaces side by side ({side.description})"
    assert manifest.dimension == encoder.dimension == encoder.llm_dimension + encoder.sentence_encoder.dimension

    # Indexing again with the same model takes the index as it is: nothing refused, nothing re-embedded.
    code, output = cli(*index_args(docs, index_dir, two_space_dir))
    assert code == 0, output
    assert "0 / 4" in output
    np.testing.assert_array_equal(stored(index_dir)[2], vectors)


def test_chunks_are_sized_by_the_document_sides_most_restrictive_part(two_space_dir, tmp_path):
    docs = tmp_path / "long_docs"
    docs.mkdir()
    words = "the tent is durable nylon and good in rain and wind".split()
    (docs / "long.txt").write_text(" . ".join(" ".join(words) for _ in range(20)) + " .")
    encoder = loaded(two_space_dir)
    side = encoder.document_side
    limit = side.token_limit
    assert limit == encoder.sentence_encoder.max_length - 2 < encoder.documents_llm.max_length  # the sentence encoder's
    index_dir = tmp_path / "index"
    code, output = cli(*index_args(docs, index_dir, two_space_dir))
    assert code == 0, output
    assert read_manifest(index_dir).chunk_size == limit
    _, texts, _ = stored(index_dir)
    assert len(texts) > 1 and max(side.text_tokens(texts)) <= limit

    code, output = cli(*index_args(docs, tmp_path / "other", two_space_dir, "--chunk-size", str(limit + 1)))
    assert code == EXIT_BAD_INPUT and f"--chunk-size {limit} or less" in " ".join(output.split())
    assert not (tmp_path / "other" / MANIFEST_FILE).exists()


def test_llm_weight_sets_the_share_of_each_space(two_space_dir, two_space_index):
    _, index_dir = two_space_index
    encoder = loaded(two_space_dir)
    rankings = {}
    for weight in (0.0, 0.25, 0.9, 1.0):
        document = query_json(index_dir, "--llm-weight", str(weight), "--explain")
        assert document["llm_weight"] == weight
        expected = expected_scores(index_dir, encoder, weight)
        hits = document["hits"]
        np.testing.assert_allclose([hit["score"] for hit in hits], [expected[hit["source"]] for hit in hits], atol=1e-4)
        assert [hit["score"] for hit in hits] == sorted((hit["score"] for hit in hits), reverse=True)
        for hit in hits:  # --explain: each space's cosine, the weight, weighted = w * llm + (1 - w) * sentence encoder
            parts = hit["explain"]
            assert parts["llm_weight"] == pytest.approx(weight)
            assert parts["weighted"] == pytest.approx(
                weight * parts["llm"] + (1 - weight) * parts["sentence_encoder"], abs=1e-6
            )
            assert parts["score"] == pytest.approx(parts["weighted"] * two_spaces_scale(weight), abs=1e-6)
            assert parts["score"] == pytest.approx(hit["score"], abs=1e-4)
        assert document["explain"]["spaces"] == 2
        rankings[weight] = {hit["source"]: hit["score"] for hit in hits}
    # The ends are each space alone: weight 1 scores by the LLM's cosine, 0 by the sentence encoder's.
    assert rankings[1.0] != rankings[0.0]
    for weight in (0.25, 0.9):  # each end's score is its cosine / sqrt 2
        for source, score in rankings[weight].items():
            weighted = weight * rankings[1.0][source] + (1 - weight) * rankings[0.0][source]
            assert score == pytest.approx(weighted * math.sqrt(2) * two_spaces_scale(weight), 1e-4)


def test_explain_prints_both_spaces_scores(two_space_index):
    _, index_dir = two_space_index
    code, output = cli(
        "query", QUERY, "-i", INSTRUCTION, "--index-dir", str(index_dir), "--explain", "--llm-weight", "0.3"
    )
    assert code == 0, output
    for heading in ("LLM cos", "sentence-encoder cos", "LLM weight", "weighted"):
        assert heading in output
    assert "LLM weight 0.3" in output and "0.3000" in output
    assert (
        "two spaces: weighted = LLM weight * LLM cos + (1 - LLM weight) * sentence encoder cos ranks the hits" in output
    )


def test_an_out_of_range_weight_is_a_usage_error(two_space_index):
    _, index_dir = two_space_index
    code, output = cli("query", QUERY, "--index-dir", str(index_dir), "--llm-weight", "1.5")
    assert code == 2 and "--llm-weight" in output


@pytest.fixture()
def symmetric_index(tiny_model_dir, tmp_path) -> tuple[Path, Path]:
    docs, index_dir = write_docs(tmp_path / "docs"), tmp_path / "index"
    code, output = cli(*index_args(docs, index_dir, tiny_model_dir))
    assert code == 0, output
    return docs, index_dir


def test_a_one_space_model_refuses_the_weight_and_explains_its_single_cosine(symmetric_index):
    _, index_dir = symmetric_index
    code, output = cli("query", QUERY, "--index-dir", str(index_dir), "--llm-weight", "0.3")
    assert code == EXIT_BAD_INPUT, output
    flat = " ".join(output.split())
    assert "not a two-space model" in flat and "Drop the option" in flat

    document = query_json(index_dir, "--explain")
    assert document["explain"]["spaces"] == 1 and "llm_weight" not in document
    for hit in document["hits"]:
        assert hit["explain"] == {"cosine": pytest.approx(hit["score"], abs=1e-5)}
    code, output = cli("query", QUERY, "--index-dir", str(index_dir), "--explain")
    assert code == 0, output
    assert "cosine" in output and "this model has one space" in output and "LLM cos" not in output


def test_a_symmetric_index_is_told_to_rebuild_for_a_two_space_model(symmetric_index, two_space_dir):
    docs, index_dir = symmetric_index
    before = stored(index_dir)[2]
    label = str(two_space_dir.resolve())
    command = f"instemb-rag index PATH --index-dir {index_dir} --rebuild --model {label}"
    for args in (
        ("query", QUERY, "--index-dir", str(index_dir), "--model", str(two_space_dir)),
        index_args(docs, index_dir, two_space_dir),
    ):
        code, output = cli(*args)
        flat = "".join(output.split("\n"))
        assert code == EXIT_INDEX_FOLDER, output
        assert command in flat and f"under {docs.resolve()}" in flat, output
        assert "documents embedded by" in flat
    np.testing.assert_array_equal(stored(index_dir)[2], before)  # nothing mixed in

    # The command it gives, PATH filled in, rebuilds the index for the two-space model.
    code, output = cli(*index_args(docs, index_dir, two_space_dir, "--rebuild"))
    assert code == 0, output
    assert read_manifest(index_dir).document_fingerprint == loaded(two_space_dir).document_fingerprint
    assert query_json(index_dir)["hits"]


def test_an_index_of_an_older_default_is_told_to_rebuild(tiny_encoder, two_space_dir, tmp_path, monkeypatch):
    """The shipped default turns into a two-space model: an index the older default built (its
    manifest written before document sides: no document fingerprint) is refused, with the command."""
    import instemb_rag.encoder.model as model

    tiny_encoder.save(tmp_path / "old_default")
    monkeypatch.setattr(model, "SHIPPED_MODEL_FOLDER", tmp_path / "old_default")
    docs, index_dir = write_docs(tmp_path / "docs"), tmp_path / "index"
    code, output = cli("index", str(docs), "--index-dir", str(index_dir), "--device", "cpu", "--no-progress")
    assert code == 0, output
    raw = json.loads((index_dir / MANIFEST_FILE).read_text())
    assert raw["encoder_reference"] == "default"
    for field in ("document_fingerprint", "document_side"):  # as an older version wrote it
        raw.pop(field, None)
    (index_dir / MANIFEST_FILE).write_text(json.dumps(raw))

    monkeypatch.setattr(model, "SHIPPED_MODEL_FOLDER", two_space_dir)
    code, output = cli("query", QUERY, "--index-dir", str(index_dir), "--device", "cpu")
    flat = "".join(output.split("\n"))
    assert code == EXIT_INDEX_FOLDER, output
    assert "both name default" in flat and "built by an older instemb-rag" in flat
    assert f"`instemb-rag index PATH --index-dir {index_dir} --rebuild`" in flat and f"under {docs.resolve()}" in flat

    code, output = cli(
        "index",
        str(docs),
        "--index-dir",
        str(index_dir),
        "--device",
        "cpu",
        "--no-progress",
        "--rebuild",
        "--chunk-overlap",
        "8",
    )
    assert code == 0, output
    assert query_json(index_dir)["hits"]


def test_an_index_of_todays_symmetric_default_is_told_to_rebuild_once_the_default_is_two_space(
    tiny_encoder, two_space_dir, tmp_path, monkeypatch
):
    """The ship step of issue 50: an index the symmetric default built with this version (its
    manifest records the default's document side) is queried, and indexed again, after the default
    became a two-space folder (documents [LLM; MiniLM]): both are refused, nothing is mixed in, the
    message says the index's own model changed and gives the rebuild command (no --model: the
    default), and that command rebuilds it."""
    import instemb_rag.encoder.model as model

    tiny_encoder.save(tmp_path / "symmetric_default")
    monkeypatch.setattr(model, "SHIPPED_MODEL_FOLDER", tmp_path / "symmetric_default")
    docs, index_dir = write_docs(tmp_path / "docs"), tmp_path / "index"
    default_args = ("--index-dir", str(index_dir), "--device", "cpu", "--no-progress", "--chunk-overlap", "8")
    code, output = cli("index", str(docs), *default_args)
    assert code == 0, output
    symmetric = read_manifest(index_dir)
    assert symmetric.encoder_reference == "default" and symmetric.document_fingerprint == tiny_encoder.fingerprint
    before = stored(index_dir)[2]

    monkeypatch.setattr(model, "SHIPPED_MODEL_FOLDER", two_space_dir)  # the shipped default is now two-space
    two_spaces = loaded(two_space_dir)
    command = f"`instemb-rag index PATH --index-dir {index_dir} --rebuild`"
    for args in (
        ("query", QUERY, "--index-dir", str(index_dir), "--device", "cpu"),
        ("index", str(docs), *default_args),
    ):
        code, output = cli(*args)
        flat = "".join(output.split("\n"))
        assert code == EXIT_INDEX_FOLDER, (args, output)
        assert "both name default" in flat and "built by an older instemb-rag" in flat, output
        assert command in flat and f"under {docs.resolve()}" in flat, output
        assert symmetric.document_fingerprint in flat and two_spaces.document_fingerprint in flat, output
        assert "two spaces side by side" in flat, output  # what embeds documents now
    np.testing.assert_array_equal(stored(index_dir)[2], before)  # nothing mixed in
    assert read_manifest(index_dir) == symmetric

    code, output = cli("index", str(docs), *default_args, "--rebuild")  # the command given, PATH filled in
    assert code == 0, output
    rebuilt = read_manifest(index_dir)
    assert rebuilt.encoder_reference == "default" and rebuilt.document_fingerprint == two_spaces.document_fingerprint
    assert rebuilt.dimension == two_spaces.dimension and query_json(index_dir, "--device", "cpu")["hits"]
