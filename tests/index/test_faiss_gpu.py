"""FAISS follows the encoder onto a CUDA GPU (issue 13): where faiss has no GPU support the
store stays on the CPU and says how to get it; where it has, GPU and CPU searches agree."""

from __future__ import annotations

import numpy as np
import pytest

from instemb_rag.index import Index, Indexer, IndexOptions
from instemb_rag.index.stores.faiss_gpu import GPU_EXTRA_HINT, faiss_gpu_available

DOCS = {
    "tent.md": "the tent is durable nylon . good in rain and wind .",
    "stove.txt": "the stove is light . packed size 10 cm . fuel gas burner .",
    "pack.txt": "the backpack strap and frame are heavy but durable .",
}


@pytest.fixture()
def built_index(tiny_encoder, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in DOCS.items():
        (docs / name).write_text(text)
    Indexer(tiny_encoder, IndexOptions(index_dir=tmp_path / "index")).run(docs)
    return tmp_path / "index"


@pytest.mark.skipif(faiss_gpu_available(), reason="checks the CPU-only faiss build")
def test_without_faiss_gpu_the_store_stays_on_the_cpu_and_says_how_to_get_it(tiny_encoder, built_index):
    with Index.open(built_index, encoder=tiny_encoder) as index:
        before = index.search("durable tent", k=3)
        note = index.store.place_on_gpu(0)
        assert note is not None and GPU_EXTRA_HINT in note
        after = index.search("durable tent", k=3)
    assert [(hit.source, hit.score) for hit in after] == [(hit.source, hit.score) for hit in before]


@pytest.mark.skipif(not faiss_gpu_available(), reason="needs a faiss GPU build and a CUDA GPU")
def test_gpu_search_matches_the_cpu_search(tiny_encoder, built_index):
    with Index.open(built_index, encoder=tiny_encoder) as index:
        vector = index.encode_query("durable tent")
        on_cpu = index.search(vector, k=3)
        assert index.store.place_on_gpu(0) is None
        on_gpu = index.search(vector, k=3)
        filtered = index.search(vector, k=3, filter={"source": "*.txt"})  # selectors: the CPU copy
    assert [hit.source for hit in on_gpu] == [hit.source for hit in on_cpu]
    assert np.allclose([hit.score for hit in on_gpu], [hit.score for hit in on_cpu], atol=1e-4)
    assert {hit.source for hit in filtered} <= {"stove.txt", "pack.txt"}
