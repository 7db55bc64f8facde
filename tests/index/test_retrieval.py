"""IndexRetriever (instemb_rag/index/retrieval.py): an index folder as a retriever, on the tiny model.

Its hits are Index.search's for the same query, filter and hybrid settings; it opens a folder with
the encoder the folder records (or one given, whose document side must be the folder's), reads a
filter tree of conditions on ``source``, takes a vector its caller embedded, and refuses to search
once closed.
"""

from __future__ import annotations

import asyncio

import pytest

from instemb_rag.errors import InstEmbError
from instemb_rag.index import BadInputError, Index, Indexer, IndexOptions
from instemb_rag.index.manifest import model_label
from instemb_rag.index.retrieval import IndexRetriever, hit_metadata, require_same_documents, source_filter
from instemb_rag.knobs import KnobError
from instemb_rag.queries import QueryKnobs

DOCS = {
    "tents/ridge.md": "the tent is durable nylon . good in rain and wind .",
    "tents/light.md": "a light tent . packed size 30 cm . weight 1 kg .",
    "stove.txt": "the stove is light . fuel gas burner .",
    "pack.txt": "the backpack strap and frame are heavy but durable .",
    "odd[1].txt": "the stove is heavy but the burner is durable .",
}
QUERY, INSTRUCTION = "which tent is light ?", "focus on weight"


@pytest.fixture()
def encoder(tiny_model_dir):
    from instemb_rag import InstEmbEncoder

    return InstEmbEncoder.from_pretrained(tiny_model_dir, device="cpu")  # the settings the folder records


@pytest.fixture()
def index_dir(encoder, tiny_model_dir, tmp_path):
    docs = tmp_path / "docs"
    for name, text in DOCS.items():
        (docs / name).parent.mkdir(parents=True, exist_ok=True)
        (docs / name).write_text(text)
    options = IndexOptions(index_dir=tmp_path / "index", model_label=model_label(str(tiny_model_dir)))
    Indexer(encoder, options).run(docs)
    return tmp_path / "index"


def found(hits) -> list[tuple[str, float]]:
    return [(hit.source, round(hit.score, 5)) for hit in hits]


def test_retrieval_is_index_search_and_a_closed_folder_says_so(index_dir, encoder):
    with Index.open(index_dir, encoder=encoder) as index:
        expected = index.search(QUERY, INSTRUCTION, k=3)
        everything = index.search(QUERY, None, k=5)
    with IndexRetriever.open(index_dir, device="cpu", k=3) as retriever:  # the encoder the folder records
        assert retriever.encoder.fingerprint == encoder.fingerprint
        assert found(retriever.retrieve(QUERY, INSTRUCTION)) == found(expected)
        assert found(retriever.retrieve(QUERY, k=5)) == found(everything)
        vector = encoder.encode_queries([QUERY], INSTRUCTION)[0]  # embedded by the caller: no text needed
        assert found(retriever.retrieve(query_vector=vector)) == found(expected)
        assert found(asyncio.run(retriever.aretrieve(QUERY, INSTRUCTION))) == found(expected)
        hit = expected[0]
        assert hit_metadata(hit) == {"source": hit.source, "position": hit.position, "chunk_id": hit.chunk_id}
    retriever.close()  # twice is harmless
    with pytest.raises(InstEmbError, match=r"This retriever was closed .*IndexRetriever\.open"):
        retriever.retrieve(QUERY)


def test_filters_by_glob_and_by_a_tree_of_conditions(index_dir, encoder):
    def sources(filter) -> set[str]:
        return {hit.source for hit in retriever.retrieve(QUERY, k=10, filter=filter)}

    def source(operator, value) -> dict:
        return {"key": "source", "operator": operator, "value": value}

    with IndexRetriever.open(index_dir, encoder, filter={"source": "tents/*"}) as retriever:
        assert {hit.source for hit in retriever.retrieve(QUERY, k=10)} == {"tents/ridge.md", "tents/light.md"}
        assert sources({"filters": [source("==", "odd[1].txt")]}) == {"odd[1].txt"}  # glob characters literally
        assert sources({"filters": [source("in", ["stove.txt", "pack.txt", "gone.txt"])]}) == {"stove.txt", "pack.txt"}
        either = {"filters": [source("==", "stove.txt"), source("==", "pack.txt")], "condition": "or"}
        assert sources(either) == {"stove.txt", "pack.txt"}
        nested = {"filters": [source("in", ["stove.txt", "pack.txt"]), {"filters": [source("==", "pack.txt")]}]}
        assert sources(nested) == {"pack.txt"}
        assert sources({"filters": [source("==", "stove.txt"), source("==", "pack.txt")]}) == set()
    refused = [
        ({"page": "2"}, "Cannot filter on 'page'"),
        ({"filters": [{"key": "page", "value": 2}]}, "metadata key 'page'"),
        ({"filters": [source("!=", "stove.txt")]}, "operator '!='"),
        ({"filters": [source("==", "stove.txt")], "condition": "not"}, "condition 'not'"),
    ]
    for filter, message in refused:
        with pytest.raises(BadInputError, match=message):
            source_filter(filter)
        with pytest.raises(BadInputError, match=message):  # before the folder opens
            IndexRetriever.open(index_dir / "not-opened", encoder, filter=filter)


def test_hybrid_settings_once_or_per_call(index_dir, encoder):
    with Index.open(index_dir, encoder=encoder) as index:
        fused = index.search("light tent stove", INSTRUCTION, k=3, hybrid="z", hybrid_weight=0.8)
        dense = index.search("light tent stove", INSTRUCTION, k=3)
    with IndexRetriever.open(index_dir, encoder, k=3, hybrid="z", hybrid_weight=0.8) as retriever:
        assert found(retriever.retrieve("light tent stove", INSTRUCTION)) == found(fused)
        vector = encoder.encode_queries(["light tent stove"], INSTRUCTION)[0]
        assert found(retriever.retrieve("light tent stove", INSTRUCTION, query_vector=vector)) == found(fused)
        with pytest.raises(BadInputError, match="reads the query's text"):  # its full-text side
            retriever.retrieve(query_vector=vector)
    with IndexRetriever.open(index_dir, encoder, k=3) as retriever:
        assert found(retriever.retrieve("light tent stove", INSTRUCTION)) == found(dense)
        per_call = retriever.retrieve("light tent stove", INSTRUCTION, hybrid="z", hybrid_weight=0.8)
        assert found(per_call) == found(fused)
        with pytest.raises(BadInputError, match="hybrid='bm25' is not a fusion rule"):
            retriever.retrieve("light tent stove", hybrid="bm25")
    with pytest.raises(BadInputError, match="hybrid weight 2.0 is outside"):
        IndexRetriever.open(index_dir, encoder, hybrid="rrf", hybrid_weight=2.0)


def test_queries_knobs_and_encoders_are_checked(index_dir, encoder, tiny_model_dir):
    from instemb_rag import InstEmbEncoder

    with IndexRetriever.open(index_dir, encoder) as retriever:
        with pytest.raises(InstEmbError, match="query is empty"):
            retriever.retrieve("   ")
        with pytest.raises(KnobError, match="one space"):  # a knob the model lacks
            retriever.retrieve(QUERY, knobs=QueryKnobs.checked(llm_weight=0.5))
        vector = encoder.encode_queries([QUERY])[0]
        with pytest.raises(BadInputError, match="llm_weight applies when the retriever embeds the query"):
            retriever.retrieve(query_vector=vector, knobs=QueryKnobs.checked(llm_weight=0.5))
        with pytest.raises(BadInputError, match="k must be at least 1"):
            IndexRetriever(retriever.index, k=0)
    other = InstEmbEncoder.from_pretrained(tiny_model_dir, device="cpu", lookahead_length=2)  # another fingerprint
    with Index.open(index_dir, encoder=encoder) as index:
        with pytest.raises(InstEmbError, match="re-index with this one"):
            IndexRetriever.open(index, other)
        require_same_documents(index.manifest.stored_vectors_fingerprint, encoder)
        shared = IndexRetriever.open(index, encoder)
        shared.close()  # the caller's Index stays open
        assert shared.retrieve(QUERY, k=1) and index.search(QUERY, k=1)
    with pytest.raises(InstEmbError, match="compared with vectors of another space"):
        IndexRetriever.open(index_dir, other)  # a folder refuses another document side as Index.open does


def test_the_encoder_reference_is_where_the_folders_model_loads_again(index_dir, encoder, tiny_model_dir, tmp_path):
    with IndexRetriever.open(index_dir, encoder) as retriever:
        assert retriever.encoder_reference == str(tiny_model_dir.resolve())  # as --model recorded it
    Indexer(encoder, IndexOptions(index_dir=tmp_path / "labelled", model_label="tiny")).run(tmp_path / "docs")
    with IndexRetriever.open(tmp_path / "labelled", encoder) as retriever:
        assert retriever.encoder_reference is None  # a label that is no folder here: none to load
