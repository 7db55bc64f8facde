"""Incremental indexing on the tiny model: add, change, delete, rebuild; both stores; manifest checks."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from helpers import fulltext_matches_chunks, indexed_state

from instemb_rag.index import Index, Indexer, IndexFolderError, IndexOptions, StoreOptions
from instemb_rag.index.manifest import FORMAT_VERSION, MANIFEST_FILE
from instemb_rag.index.stores.qdrant import QdrantStore

STORES = ["faiss", "qdrant"]


def write_docs(folder: Path) -> Path:
    (folder / "tents").mkdir(parents=True)
    (folder / "tents" / "ridge.md").write_text("the tent is durable nylon . good in rain and wind .")
    (folder / "stove.txt").write_text("the stove is light . packed size 10 cm . fuel gas burner .")
    (folder / "pack.txt").write_text("the backpack strap and frame are heavy but durable .")
    return folder


def run_index(encoder, docs: Path, index_dir: Path, **options):
    stores = StoreOptions(store=options.pop("store", None), faiss_index=options.pop("faiss_index", None))
    return Indexer(encoder, IndexOptions(index_dir=index_dir, stores=stores, **options)).run(docs)


@pytest.mark.parametrize("store", STORES)
def test_add_change_delete_touch_only_what_changed(tiny_encoder, tmp_path, store):
    docs, index_dir = write_docs(tmp_path / "docs"), tmp_path / "index"
    first = run_index(tiny_encoder, docs, index_dir, store=store)
    assert sorted(first.indexed) == ["pack.txt", "stove.txt", "tents/ridge.md"]

    again = run_index(tiny_encoder, docs, index_dir)
    assert again.indexed == [] and again.unchanged == 3 and again.chunks_added == 0

    (docs / "new.md").write_text("a warm camp night with a good stove .")
    (docs / "stove.txt").write_text("the stove burner is heavy and warm .")
    (docs / "pack.txt").unlink()
    update = run_index(tiny_encoder, docs, index_dir)
    assert sorted(update.indexed) == ["new.md", "stove.txt"]
    assert update.removed == ["pack.txt"] and update.unchanged == 1

    state = indexed_state(index_dir)
    assert sorted(state) == ["new.md", "stove.txt", "tents/ridge.md"]
    fulltext_matches_chunks(index_dir)
    assert state["stove.txt"] == ["the stove burner is heavy and warm ."]

    with Index.open(index_dir, encoder=tiny_encoder) as index:
        hits = index.search("heavy warm stove burner", k=10)
        assert sorted(hit.source for hit in hits) == ["new.md", "stove.txt", "tents/ridge.md"]
        expected = tiny_encoder.encode_documents(["the stove burner is heavy and warm ."])[0]
        query = tiny_encoder.encode_queries(["heavy warm stove burner"])[0]
        stove_hit = next(hit for hit in hits if hit.source == "stove.txt")
        assert stove_hit.score == pytest.approx(float(expected @ query), abs=1e-4)


@pytest.mark.parametrize("store", STORES)
def test_filter_by_exact_source_and_glob(tiny_encoder, tmp_path, store):
    docs, index_dir = write_docs(tmp_path / "docs"), tmp_path / "index"
    run_index(tiny_encoder, docs, index_dir, store=store)
    with Index.open(index_dir, encoder=tiny_encoder) as index:
        assert [hit.source for hit in index.search("tent", k=5, filter={"source": "tents/ridge.md"})] == [
            "tents/ridge.md"
        ]
        assert sorted(hit.source for hit in index.search("tent", k=5, filter={"source": "*.txt"})) == [
            "pack.txt",
            "stove.txt",
        ]
        assert index.search("tent", k=5, filter={"source": "nothing/*"}) == []


def test_rebuild_starts_over_and_faiss_kinds_agree_on_small_corpus(tiny_encoder, tmp_path):
    docs, index_dir = write_docs(tmp_path / "docs"), tmp_path / "index"
    run_index(tiny_encoder, docs, index_dir)
    rebuilt = run_index(tiny_encoder, docs, index_dir, rebuild=True, faiss_index="hnsw")
    assert len(rebuilt.indexed) == 3 and rebuilt.unchanged == 0
    manifest = json.loads((index_dir / MANIFEST_FILE).read_text())
    assert manifest["store_options"] == {"faiss_index": "hnsw"}
    assert len(list(index_dir.glob("vectors-g*.faiss"))) == 1
    with Index.open(index_dir, encoder=tiny_encoder) as index:
        assert len(index.search("durable tent", k=3)) == 3


def test_switching_store_without_rebuild_is_refused(tiny_encoder, tmp_path):
    docs, index_dir = write_docs(tmp_path / "docs"), tmp_path / "index"
    run_index(tiny_encoder, docs, index_dir, store="faiss")
    with pytest.raises(IndexFolderError, match="--rebuild"):
        run_index(tiny_encoder, docs, index_dir, store="qdrant")
    assert len(indexed_state(index_dir)) == 3  # nothing lost


def test_another_model_is_refused_with_advice(tiny_encoder, tiny_model_dir, tmp_path):
    from instemb_rag import InstEmbEncoder

    docs, index_dir = write_docs(tmp_path / "docs"), tmp_path / "index"
    run_index(tiny_encoder, docs, index_dir)
    other = InstEmbEncoder.from_pretrained(tiny_model_dir, device="cpu", lookahead_length=2, max_length=64)
    with pytest.raises(IndexFolderError, match="same --model"):
        Index.open(index_dir, encoder=other)
    with pytest.raises(IndexFolderError, match="--rebuild"):
        run_index(other, docs, index_dir)
    assert len(indexed_state(index_dir)) == 3


def test_newer_format_version_is_refused(tiny_encoder, tmp_path):
    docs, index_dir = write_docs(tmp_path / "docs"), tmp_path / "index"
    run_index(tiny_encoder, docs, index_dir)
    path = index_dir / MANIFEST_FILE
    manifest = json.loads(path.read_text())
    manifest["format_version"] = FORMAT_VERSION + 1
    path.write_text(json.dumps(manifest))
    with pytest.raises(IndexFolderError, match="Upgrade instemb-rag"):
        Index.open(index_dir, encoder=tiny_encoder)


def test_indexing_another_folder_into_the_same_index_is_refused(tiny_encoder, tmp_path):
    index_dir = tmp_path / "index"
    run_index(tiny_encoder, write_docs(tmp_path / "docs"), index_dir)
    with pytest.raises(IndexFolderError, match="another --index-dir"):
        run_index(tiny_encoder, write_docs(tmp_path / "other"), index_dir)
    assert len(indexed_state(index_dir)) == 3


def test_stale_faiss_cache_is_rebuilt_from_the_catalog(tiny_encoder, tmp_path):
    docs, index_dir = write_docs(tmp_path / "docs"), tmp_path / "index"
    run_index(tiny_encoder, docs, index_dir)
    for cache in index_dir.glob("vectors-g*.faiss"):
        cache.unlink()
    with Index.open(index_dir, encoder=tiny_encoder) as index:
        assert len(index.search("tent", k=10)) == 3


def test_server_qdrant_code_path_and_dimension_check():
    from qdrant_client import QdrantClient

    # qdrant-client's in-memory mode answers the same client calls a server does.
    client = QdrantClient(location=":memory:")
    store = QdrantStore.server("memory", None, "docs", 64, client=client)
    vectors = np.eye(64, dtype=np.float32)[:3]
    payloads = [{"source": "a.md", "position": 0}, {"source": "b.md", "position": 0}, {"source": "b.md", "position": 1}]
    store.upsert([7, 8, 9], vectors, payloads)
    assert store.all_ids() == {7, 8, 9}
    assert store.search(vectors[1], 2, None)[0][0] == 8
    assert [hit[0] for hit in store.search(vectors[1], 3, ["a.md"])] == [7]
    store.delete([8])
    assert store.all_ids() == {7, 9} and store.point_count() == 2
    with pytest.raises(IndexFolderError, match="holds 64-d vectors but this encoder makes 32-d"):
        QdrantStore.server("memory", None, "docs", 32, client=client)
