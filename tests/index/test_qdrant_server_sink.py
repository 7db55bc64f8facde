"""The Qdrant server sink of `index` (and of `index --ray`): collection layout options, batched
upserts with content-derived point ids (a retried batch cannot duplicate), the workers-write
protocol (stale points deleted by the driver, a killed run repaired), and a fast, clear failure
for an unreachable --qdrant-url or --ray address.

No Qdrant server runs here: qdrant-client's in-memory mode answers the same client calls; the
layout options (accepted by a server only) are checked on the request the client would send."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
from testing import free_port
from typer.testing import CliRunner

from instemb_rag.cli import app
from instemb_rag.index import StoreOptions
from instemb_rag.index.catalog import Catalog, content_chunk_id
from instemb_rag.index.documents import Chunk
from instemb_rag.index.manifest import Manifest
from instemb_rag.index.options import CollectionOptions, resolve_options
from instemb_rag.index.stores.qdrant import UPSERT_BATCH, QdrantStore, collection_request

runner = CliRunner()


def memory_client():
    from qdrant_client import QdrantClient

    return QdrantClient(location=":memory:")


class RecordingClient:
    """The in-memory client, recording the calls a server would receive."""

    def __init__(self):
        self.inner = memory_client()
        self.calls: list[tuple[str, dict]] = []

    def __getattr__(self, name):
        method = getattr(self.inner, name)

        def record(*args, **kwargs):
            self.calls.append((name, kwargs))
            return method(*args, **kwargs)

        return record


def test_collection_options_reach_the_create_request():
    from qdrant_client import models

    layout = CollectionOptions(
        shard_number=6, replication_factor=2, write_consistency_factor=2, on_disk=True, quantization="int8"
    )
    request = collection_request("docs", 64, layout, models)
    # the body qdrant-client sends to PUT /collections/docs (the server's own schema)
    fields = {k: v for k, v in request.items() if k not in ("collection_name", "vectors_config")}
    body = models.CreateCollection(vectors=request["vectors_config"], **fields).model_dump(
        exclude_none=True, mode="json"
    )
    assert body["shard_number"] == 6 and body["replication_factor"] == 2 and body["write_consistency_factor"] == 2
    assert body["vectors"] == {"size": 64, "distance": "Dot", "on_disk": True}
    assert body["quantization_config"] == {"scalar": {"type": "int8", "always_ram": True}}
    plain = collection_request("docs", 64, CollectionOptions(), models)
    assert set(plain) == {"collection_name", "vectors_config"} and plain["vectors_config"].on_disk is None

    client = RecordingClient()
    store = QdrantStore.server("http://qdrant:6333", None, "docs", 64, client=client, collection_options=layout)
    created = dict(client.calls)["create_collection"]
    assert created["shard_number"] == 6 and created["quantization_config"].scalar.type == "int8"
    assert store.describe() == {
        "qdrant_url": "http://qdrant:6333",
        "qdrant_collection": "docs",
        "shard_number": 6,
        "replication_factor": 2,
        "write_consistency_factor": 2,
        "on_disk": True,
        "quantization": "int8",
    }


def test_an_existing_index_keeps_the_layout_its_manifest_recorded(tmp_path):
    recorded = {"qdrant_url": "http://q:6333", "qdrant_collection": "docs", "shard_number": 4, "quantization": "int8"}
    manifest = Manifest(
        encoder_fingerprint="f",
        encoder_reference="m",
        template={},
        dimension=8,
        store="qdrant",
        store_options=recorded,
        chunk_size=64,
        chunk_overlap=8,
    )
    resolved = resolve_options(StoreOptions(qdrant_url="http://q:6333", shard_number=9), manifest, tmp_path)
    assert resolved.collection_options() == CollectionOptions(shard_number=4, quantization="int8")
    assert StoreOptions.from_manifest(manifest).collection_options() == CollectionOptions(
        shard_number=4, quantization="int8"
    )


def test_upserts_are_batched_and_a_retried_batch_does_not_duplicate():
    client = RecordingClient()
    store = QdrantStore.server("http://qdrant:6333", None, "docs", 8, client=client)
    chunks = [Chunk(n, f"chunk {n}", {}) for n in range(UPSERT_BATCH + 10)]
    ids = [content_chunk_id("a.md", c.position, c.text, c.extra) for c in chunks]
    assert ids == [content_chunk_id("a.md", c.position, c.text, c.extra) for c in chunks]  # deterministic
    assert len(set(ids)) == len(ids)
    vectors = np.random.default_rng(0).normal(size=(len(ids), 8)).astype(np.float32)
    payloads = [{"source": "a.md", "position": c.position} for c in chunks]
    store.upsert(ids, vectors, payloads)
    assert [len(kwargs["points"]) for name, kwargs in client.calls if name == "upsert"] == [UPSERT_BATCH, 10]
    store.upsert(ids, vectors, payloads)  # a retry of the same batches
    assert store.all_ids() == set(ids)


def test_workers_write_the_points_and_the_driver_keeps_the_catalog(tiny_encoder, tmp_path):
    from instemb_rag.index.ray_embedding import EmbedChunks, WorkerWrittenStore

    client = memory_client()
    store = QdrantStore.server("http://qdrant:6333", None, "docs", tiny_encoder.dimension, client=client)
    catalog = Catalog.open(tmp_path)
    store.catalog = catalog
    worker = EmbedChunks.__new__(EmbedChunks)  # the actor's state without loading a second encoder
    worker.encoder, worker.batch_size = tiny_encoder, 4
    worker.sink = store.transport

    def embed(source: str, texts: list[str]) -> tuple[list[Chunk], np.ndarray]:
        batch = {
            "source": np.array([source] * len(texts), dtype=object),
            "position": np.arange(len(texts)),
            "text": np.array(texts, dtype=object),
            "extra": np.array(["{}"] * len(texts), dtype=object),
            "count": np.full(len(texts), len(texts)),
        }
        out = worker(batch)
        return [Chunk(n, t, {}) for n, t in enumerate(texts)], out["vector"]

    def commit(written, source, chunks, vectors):
        removed, added = catalog.replace_file(source, "sha-" + chunks[0].text, 1, chunks, vectors)
        written.apply(removed, added, vectors, [{"source": source, "position": c.position} for c in chunks])
        return added

    written = WorkerWrittenStore(store, catalog)
    assert catalog.store_generation == -1  # lagging for the whole run: a kill leaves it to repair()
    first = commit(written, "a.md", *embed("a.md", ["the tent is light .", "the stove is warm ."]))
    commit(written, "b.md", *embed("b.md", ["a durable pack ."]))
    embed("a.md", ["the tent is light .", "the stove is warm ."])  # a retried worker batch
    assert store.all_ids() == set(catalog.vectors()[0].tolist())
    # a.md changes: its unchanged first chunk keeps its id (overwritten), the stale one goes
    second = commit(written, "a.md", *embed("a.md", ["the tent is light .", "the pole is great ."]))
    assert second[0] == first[0] and second[1] != first[1]
    assert store.all_ids() == set(catalog.vectors()[0].tolist())
    # killed here: a worker wrote c.md's points, the driver never committed them
    embed("c.md", ["a cold night ."])
    assert len(store.all_ids()) == len(catalog.vectors()[0]) + 1
    note = store.repair()
    assert "1 stray points removed" in note and store.all_ids() == set(catalog.vectors()[0].tolist())
    assert catalog.store_generation == catalog.generation
    catalog.close()


def test_chunk_ids_come_from_content_and_a_collision_takes_the_next_salt(tmp_path, monkeypatch):
    from instemb_rag.index import catalog as catalog_module

    catalog = Catalog.open(tmp_path)
    chunks = [Chunk(0, "same text", {}), Chunk(1, "other", {"page": "2"})]
    vectors = np.zeros((2, 4), np.float32)
    _, added = catalog.replace_file("a.md", "h1", 1, chunks, vectors)
    assert added == [content_chunk_id("a.md", 0, "same text", {}), content_chunk_id("a.md", 1, "other", {"page": "2"})]
    _, again = catalog.replace_file("a.md", "h2", 1, chunks, vectors)  # same content, same ids
    assert again == added
    real = catalog_module.content_chunk_id
    monkeypatch.setattr(
        catalog_module,
        "content_chunk_id",
        lambda source, position, text, extra, salt=0: (
            added[0] if salt == 0 else real(source, position, text, extra, salt)
        ),
    )
    _, salted = catalog.replace_file("b.md", "h3", 1, [Chunk(0, "different", {})], vectors[:1])
    assert salted == [real("b.md", 0, "different", {}, 1)]
    catalog.close()


def cli(*args: str):
    result = runner.invoke(app, list(args), env={"COLUMNS": "200"})
    return result.exit_code, " ".join(result.output.split())


@pytest.fixture()
def docs(tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "tent.md").write_text("the tent is durable nylon .")
    return folder


def test_unreachable_qdrant_url_fails_in_seconds(docs, tiny_model_dir, tmp_path):
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    started = time.monotonic()
    code, output = cli(
        "index",
        str(docs),
        "--index-dir",
        str(tmp_path / "i"),
        "--store",
        "qdrant",
        "--qdrant-url",
        url,
        "--model",
        str(tiny_model_dir),
        "--device",
        "cpu",
        "--no-progress",
    )
    assert code == 4, output
    assert f"Cannot reach the Qdrant server at {url}" in output and "Check that the server is running" in output
    assert time.monotonic() - started < 60  # model loading included; the connection check itself is ~ms


@pytest.mark.parametrize("scheme", ["", "ray://"])
def test_unreachable_ray_address_fails_in_seconds_before_loading_a_model(docs, tmp_path, scheme):
    pytest.importorskip("ray", reason="the `ray` extra is not installed (pip install 'instemb-rag[ray]')")
    address = f"{scheme}127.0.0.1:{free_port()}"
    started = time.monotonic()
    code, output = cli(
        "index",
        str(docs),
        "--index-dir",
        str(tmp_path / "i"),
        "--ray",
        address,
        "--model",
        str(tmp_path / "no-model-needed-yet"),
        "--no-progress",
    )
    assert code == 2, output
    assert f"Cannot reach the Ray cluster at {address}" in output and "Check that the head node is running" in output
    assert time.monotonic() - started < 30


def test_bare_ray_flag_means_a_local_runtime_and_ray_options_need_it(docs, tmp_path, monkeypatch):
    from instemb_rag.cli import index as index_module

    seen = {}

    def fake_ray_options(address, *rest):
        seen["address"] = address
        raise ValueError("stop here")

    monkeypatch.setattr(index_module, "ray_options", fake_ray_options)
    code, _ = cli("index", str(docs), "--ray", "--no-progress")
    assert code == 2 and seen["address"] == "local"
    code, _ = cli("index", str(docs), "--no-progress", "--ray", "auto")
    assert seen["address"] == "auto"
    code, output = cli("index", str(docs), "--ray-workers", "2")
    assert code == 2 and "--ray-workers and --ray-gpus-per-worker need --ray" in output


def test_content_chunk_ids_are_json_safe():
    chunk_id = content_chunk_id("a" * 50, 3, "text" * 100, {"page": "7"})
    assert 0 < chunk_id < 2**53 and json.loads(json.dumps(chunk_id)) == chunk_id


def test_ray_addresses_are_parsed_and_auto_is_resolved(monkeypatch, tmp_path):
    from instemb_rag.index.ray_embedding import RayUnreachableError, resolve_auto, split_address

    assert split_address("10.0.0.5") == ("10.0.0.5", 6379)
    assert split_address("10.0.0.5:6380") == ("10.0.0.5", 6380)
    assert split_address("ray://head") == ("head", 10001)
    assert split_address("ray://[::1]:10002") == ("::1", 10002)
    with pytest.raises(RayUnreachableError, match="is not a Ray address"):
        split_address("head:port")
    monkeypatch.setenv("RAY_ADDRESS", "ray://head:10001")
    assert resolve_auto() == "ray://head:10001"
    monkeypatch.delenv("RAY_ADDRESS")
    monkeypatch.setattr("tempfile.gettempdir", lambda: str(tmp_path))
    with pytest.raises(RayUnreachableError, match="found no running Ray cluster"):
        resolve_auto()
    (tmp_path / "ray").mkdir()
    (tmp_path / "ray" / "ray_current_cluster").write_text("10.0.0.5:6379\n")
    assert resolve_auto() == "10.0.0.5:6379"


def test_the_ray_workers_sink_comes_from_the_store_registry(tiny_encoder, tmp_path):
    """`index --ray` names no store: a server collection's registration hands the workers a sink
    and opens its writer there (stores/qdrant_ray.py); the embedded shard is written by the driver."""
    from instemb_rag.index.ray_embedding import RayEmbedding, WorkerWrittenStore
    from instemb_rag.index.stores.qdrant import EdgeShard, ServerCollection
    from instemb_rag.index.stores.registry import open_worker_writer, worker_sink

    client = memory_client()
    store = QdrantStore.server("http://qdrant:6333", None, "docs", tiny_encoder.dimension, client=client)
    options = StoreOptions(store="qdrant", qdrant_url="http://qdrant:6333", qdrant_api_key="k")
    sink = worker_sink(store, options)
    assert sink == {"store": "qdrant", "url": "http://qdrant:6333", "api_key": "k", "collection": "docs"}
    writer = open_worker_writer({**sink, "client": client}, tiny_encoder.dimension)
    assert isinstance(writer, ServerCollection) and writer.collection == "docs"
    shard = QdrantStore(
        EdgeShard(tmp_path / "shard", tiny_encoder.dimension), {"qdrant": "embedded"}, tiny_encoder.dimension
    )
    assert worker_sink(shard, options) is None and worker_sink(None, options) is None
    shard.close()
    step = RayEmbedding.__new__(RayEmbedding)  # the driver's binding, without a cluster
    step.options = type("Options", (), {"stores": options})()
    catalog = Catalog.open(tmp_path)
    assert isinstance(step.bind_store(store, catalog), WorkerWrittenStore) and step.sink == sink
