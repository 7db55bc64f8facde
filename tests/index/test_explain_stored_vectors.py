"""`Index.explain` reads the hits' document vectors the catalog stores instead of embedding every
hit's text again (issue 62 item 4), with the same rows as the encoder's explain over the texts; a
hit that is not the catalog's chunk as it is now is embedded from its text."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from testing import TENT_DOCS

from instemb_rag.errors import InstEmbError
from instemb_rag.index import Index, Indexer, IndexOptions

pytest.importorskip("sentence_transformers")

DOCS = TENT_DOCS
QUERY, INSTRUCTION = "which tent is light ?", "focus on weight"


@pytest.fixture(scope="module", params=["two spaces", "instruction effect"])
def indexed(request, tiny_model_dir, tiny_st_dir, tmp_path_factory):
    """(encoder, index folder): every arrangement whose explain splits a score into its spaces."""
    from instemb_rag.encoder.load import untrained_effect, untrained_two_spaces

    build = untrained_two_spaces if request.param == "two spaces" else untrained_effect
    encoder = build(str(tiny_model_dir), str(tiny_st_dir), device="cpu", lookahead_length=2)
    root = tmp_path_factory.mktemp("explain_stored")
    for relative, text in DOCS.items():
        (root / "docs" / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / "docs" / relative).write_text(text)
    Indexer(encoder, IndexOptions(index_dir=root / "index", chunk_overlap=8)).run(root / "docs")
    return encoder, root / "index"


class DocumentEmbeddings:
    """Counts the texts each document part embeds (each part's own encode_documents, called through)."""

    def __init__(self, monkeypatch, encoder):
        self.texts = 0
        for part in (encoder.documents_llm, encoder.sentence_encoder):
            monkeypatch.setattr(part, "encode_documents", self.counted(part.encode_documents))

    def counted(self, encode):
        def encode_documents(documents, *args, **kwargs):
            documents = list(documents)
            self.texts += len(documents)
            return encode(documents, *args, **kwargs)

        return encode_documents


def assert_same_rows(found: list[dict], expected: list[dict]) -> None:
    assert len(found) == len(expected)
    for row, other in zip(found, expected):
        assert row.keys() == other.keys()
        np.testing.assert_allclose([row[key] for key in row], [other[key] for key in row], rtol=1e-5, atol=1e-5)


def test_explain_reads_the_stored_vectors_with_the_rows_of_embedding_the_texts(indexed, monkeypatch):
    encoder, index_dir = indexed
    with Index.open(index_dir, encoder=encoder) as index:
        hits = index.search(QUERY, INSTRUCTION, k=len(DOCS))
        knobs = {index.query_knob: 0.3}
        embedded = DocumentEmbeddings(monkeypatch, encoder)
        stored = index.explain(QUERY, INSTRUCTION, hits, knobs=knobs)
        assert embedded.texts == 0  # no hit's text embedded again
        again = encoder.explain(QUERY, INSTRUCTION, [hit.text for hit in hits], **knobs)
        assert embedded.texts == 2 * len(hits)  # the re-embedding path: each text by both parts
    assert_same_rows(stored, again)
    plain = encoder.explain(QUERY, INSTRUCTION, [hit.text for hit in hits])  # the model's own knob
    with Index.open(index_dir, encoder=encoder) as index:
        assert_same_rows(index.explain(QUERY, INSTRUCTION, hits), plain)
        # What the search scored is what explain says ranks it.
        np.testing.assert_allclose([row["score"] for row in plain], [hit.score for hit in hits], atol=1e-5)


def test_a_hit_that_is_not_the_catalogs_chunk_as_it_is_is_embedded_from_its_text(indexed, monkeypatch):
    encoder, index_dir = indexed
    with Index.open(index_dir, encoder=encoder) as index:
        hits = index.search(QUERY, INSTRUCTION, k=2)
        changed = [hits[0], replace(hits[1], text=hits[1].text + " and a new sentence .")]
        embedded = DocumentEmbeddings(monkeypatch, encoder)
        found = index.explain(QUERY, INSTRUCTION, changed)
        assert embedded.texts == 2 * len(changed)
    assert_same_rows(found, encoder.explain(QUERY, INSTRUCTION, [hit.text for hit in changed]))


def test_vectors_of_another_width_are_refused_saying_to_give_texts(indexed):
    encoder, _ = indexed
    with pytest.raises(InstEmbError, match="give the documents' texts instead"):
        encoder.explain(QUERY, INSTRUCTION, np.zeros((1, 3), dtype=np.float32))


def test_the_halves_come_back_from_the_document_vectors(indexed):
    encoder, _ = indexed
    texts = list(DOCS.values())
    llm, sentence_encoder = encoder.documents_by_space(texts)
    split_llm, split_tower = encoder.documents_by_space(encoder.encode_documents(texts))
    np.testing.assert_allclose(split_llm, llm, atol=1e-6)
    np.testing.assert_allclose(split_tower, sentence_encoder, atol=1e-6)
