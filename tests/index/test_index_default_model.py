"""End to end on the bundled sample documents with the real default model as a whole (slow):
symmetric, or two-space once that ships."""

from __future__ import annotations

import pytest

from instemb_rag.cli.demo import DEMO_INSTRUCTIONS, DEMO_QUERY, SAMPLE_DOCS
from instemb_rag.index import Index, Indexer, IndexOptions, StoreOptions

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def sample_indexes(default_model, tmp_path_factory):
    """FAISS over the whole sample corpus; Qdrant over its tents/ folder only (CPU time)."""
    built = {}
    for store, folder in (("faiss", SAMPLE_DOCS), ("qdrant", SAMPLE_DOCS / "tents")):
        index_dir = tmp_path_factory.mktemp(f"sample-{store}")
        report = Indexer(default_model, IndexOptions(index_dir=index_dir, stores=StoreOptions(store=store))).run(folder)
        assert report.skipped == [] and len(report.indexed) == report.files_found >= 5
        built[store] = index_dir
    return built


def test_both_stores_return_the_same_ranking(default_model, sample_indexes):
    with Index.open(sample_indexes["faiss"], encoder=default_model) as index:
        faiss_hits = index.search(DEMO_QUERY, DEMO_INSTRUCTIONS[0], k=5, filter={"source": "tents/*"})
    with Index.open(sample_indexes["qdrant"], encoder=default_model) as index:
        qdrant_hits = index.search(DEMO_QUERY, DEMO_INSTRUCTIONS[0], k=5)
    assert len(faiss_hits) == 5
    # Paths are relative to the indexed folder, so the Qdrant index names tents/x.md as x.md.
    assert [(h.source, round(h.score, 3)) for h in faiss_hits] == [
        ("tents/" + h.source, round(h.score, 3)) for h in qdrant_hits
    ]


def test_the_two_demo_instructions_rank_differently(default_model, sample_indexes):
    """The instruction changes the ranking. Whether each instruction's written answer comes first is
    what the demo prints, not pinned here: the sample (rewritten for issue 63 before any model read
    it) puts the instructions' words only on a page that says it is the wrong tent, and the shipped
    default ranks that page first under both (README, "What the demo shows")."""
    with Index.open(sample_indexes["faiss"], encoder=default_model) as index:
        durability, size = (index.search(DEMO_QUERY, instruction, k=3) for instruction in DEMO_INSTRUCTIONS)
    assert [hit.source for hit in durability] != [hit.source for hit in size]


def test_filter_on_the_sample_corpus(default_model, sample_indexes):
    with Index.open(sample_indexes["qdrant"], encoder=default_model) as index:
        hits = index.search("Which tent is lightest?", k=5, filter={"source": "featherlite-*"})
    assert sorted(hit.source for hit in hits) == ["featherlite-ul1-reviews.txt", "featherlite-ul1.md"]
