"""Index.search from several threads: one catalog connection shared behind the catalog's lock."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from instemb_rag.index import Index, Indexer, IndexOptions, StoreOptions


@pytest.mark.parametrize("store", ["faiss", "qdrant"])
def test_search_from_a_thread_pool_matches_the_opening_thread(tiny_encoder, tmp_path, store):
    docs = tmp_path / "docs"
    docs.mkdir()
    texts = ["the tent is durable nylon .", "the stove is light and warm .", "the backpack strap is heavy ."]
    for number, text in enumerate(texts):
        (docs / f"doc{number}.txt").write_text(text)
    options = IndexOptions(index_dir=tmp_path / "index", stores=StoreOptions(store=store))
    Indexer(tiny_encoder, options).run(docs)
    queries = tiny_encoder.encode_queries(["light tent", "heavy stove", "durable pack"])
    filters = [None, {"source": "doc[01].txt"}, {"source": ["doc2.txt", "doc0.txt"]}]

    def ranked(vector: np.ndarray, filter) -> list[tuple[str, float]]:
        return [(hit.source, round(hit.score, 5)) for hit in index.search(vector, k=3, filter=filter)]

    with Index.open(tmp_path / "index", encoder=tiny_encoder) as index:
        calls = [(queries[i % 3], filters[i % 3]) for i in range(30)]
        expected = [ranked(vector, filter) for vector, filter in calls]
        with ThreadPoolExecutor(max_workers=6) as pool:
            got = list(pool.map(lambda call: ranked(*call), calls))
    assert got == expected
    assert {source for source, _ in expected[2]} == {"doc0.txt", "doc2.txt"}
