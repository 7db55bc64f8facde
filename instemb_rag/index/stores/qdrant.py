"""Qdrant vector store: embedded on disk (qdrant-edge-py) or a server/cluster (qdrant-client).

One class, ``QdrantStore``, holds everything the two have in common (keeping the store in step
with the catalog, repair after a kill, search with a filter on ``source``, falling back to exact
search when the store lags); it talks to Qdrant through one of two small transports:

- ``EdgeShard``: the Qdrant engine in this process, a shard in INDEX_DIR/qdrant. On 10,000 random
  576-d vectors with a payload filter, qdrant-client's local mode (pure Python) answers in ~230 ms
  per query, the engine in ~1 ms (benchmarks/bench_qdrant_embedded.py), so the embedded default
  uses the engine;
- ``ServerCollection``: a collection on a server or cluster through qdrant-client (`--qdrant-url`).

Point id = catalog chunk id (content-derived: catalog.content_chunk_id, so a Ray worker writes a
server's points before the driver commits them, qdrant_ray.py, and a retried batch overwrites
itself), payload {source, position}; text stays in the catalog, the source of truth.

A server collection is created with the options of ``CollectionOptions`` (shards, replication,
write consistency, on-disk vectors, int8 scalar quantization; docs/scale-out.md); the server is
checked reachable within ``CONNECT_TIMEOUT_S`` so a wrong URL fails in seconds.

Registered as the store ``qdrant`` (``REGISTRATION``, registry.py): its settings are `index --help`'s
"Qdrant server" options; the resident process opens it per query (``kept_open=False``: the shard holds
the lock); a rebuild drops a server collection (``wipe``). Its packages are imported where used.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from ...choices import QdrantQuantization
from ...net import unreachable_reason
from ..errors import BadInputError, IndexBusyError, IndexFolderError
from ..lock import hold_index_lock
from .registry import AS_CREATED, StoreRegistration, StoreSetting

if TYPE_CHECKING:
    import numpy as np

SHARD_DIR = "qdrant"
SCROLL_PAGE = 1000
UPSERT_BATCH = 256  # points per upsert request to a server
BUSY_NOTE = "an index run is in progress: exact search over the last committed chunks"
LAG_NOTE = "the Qdrant store lags the catalog: exact search over the committed chunks"
CONNECT_TIMEOUT_S = 5.0  # TCP reachability of --qdrant-url, and qdrant-client's request timeout floor
REQUEST_TIMEOUT_S = 60
DEFAULT_COLLECTION = "instemb"
SERVER_PANEL = "Qdrant server"  # the help panel of its options in `instemb-rag index --help`


def server_setting(name: str, flag: str, help: str, **declared) -> StoreSetting:
    """A setting of a server collection, in the "Qdrant server" panel of `index --help`."""
    return StoreSetting(name, flag, help, panel=SERVER_PANEL, **declared)


def layout_setting(name: str, flag: str, help: str, **declared) -> StoreSetting:
    """A setting of a new server collection's layout: fixed when the collection is created."""
    return server_setting(name, flag, f"New server collection: {help}", on_existing_index=AS_CREATED, **declared)


def layout_count(name: str, flag: str, help: str) -> StoreSetting:
    return layout_setting(name, flag, help, type=int, minimum=1)


REGISTRATION = StoreRegistration(
    name="qdrant",
    store_class=f"{__name__}:QdrantStore",
    summary="qdrant: embedded on disk, or a server with --qdrant-url",
    kept_open=False,  # the embedded shard holds the index lock while open: one query at a time
    worker_sink=f"{__package__}.qdrant_ray:worker_sink",  # `index --ray`: the workers write a server's points
    worker_writer=f"{__package__}.qdrant_ray:worker_writer",
    settings=(
        server_setting(
            "qdrant_url",
            "--qdrant-url",
            "Qdrant server/cluster URL; default: embedded on disk.",
            at_query=True,
            query_help="Override the server URL stored in the index.",
        ),
        server_setting(
            "qdrant_api_key", "--qdrant-api-key", "API key for --qdrant-url.", envvar="QDRANT_API_KEY", at_query=True
        ),
        server_setting(
            "qdrant_collection", "--qdrant-collection", "Collection name on the server.", default=DEFAULT_COLLECTION
        ),
        layout_count("shard_number", "--qdrant-shards", "shard_number (shards spread over the cluster's nodes)."),
        layout_count("replication_factor", "--qdrant-replication", "replication_factor (copies of each shard)."),
        layout_count(
            "write_consistency_factor",
            "--qdrant-write-consistency",
            "write_consistency_factor (replicas that acknowledge a write).",
        ),
        layout_setting("on_disk", "--qdrant-on-disk", "vectors memory-mapped from disk.", default=False, type=bool),
        layout_setting(
            "quantization",
            "--qdrant-quantization",
            "int8 = scalar quantization kept in RAM (4x smaller), originals rescore.",
            default="none",
            type=QdrantQuantization,
        ),
    ),
)


@dataclass(frozen=True)
class CollectionOptions:
    """How a new server collection is laid out (Qdrant distributed mode). None: the server's default.

    shard_number: shards the points are split over (spread across the cluster's nodes);
    replication_factor: copies of each shard; write_consistency_factor: replicas that must
    acknowledge a write; on_disk: vectors memory-mapped from disk instead of RAM;
    quantization "int8": scalar int8 copies of the vectors kept in RAM for search (4x smaller),
    the float32 originals used to rescore."""

    shard_number: int | None = None
    replication_factor: int | None = None
    write_consistency_factor: int | None = None
    on_disk: bool = False
    quantization: str = "none"

    def recorded(self) -> dict:
        """The non-default options, as the manifest records them."""
        default = CollectionOptions()
        return {key: value for key, value in asdict(self).items() if value != getattr(default, key)}

    @classmethod
    def from_recorded(cls, recorded: dict) -> CollectionOptions:
        return cls(**{key: recorded[key] for key in asdict(cls()) if key in recorded})

    @classmethod
    def of(cls, options) -> CollectionOptions:
        """The layout a ``StoreOptions`` holds (its layout settings)."""
        return cls(**{key: getattr(options, key) for key in asdict(cls())})


def collection_request(collection: str, dimension: int, options: CollectionOptions, models) -> dict:
    """The keyword arguments of ``QdrantClient.create_collection`` for a new collection."""
    request = {
        "collection_name": collection,
        "vectors_config": models.VectorParams(
            size=dimension, distance=models.Distance.DOT, on_disk=options.on_disk or None
        ),
    }
    for key in ("shard_number", "replication_factor", "write_consistency_factor"):
        if getattr(options, key) is not None:
            request[key] = getattr(options, key)
    if options.quantization == "int8":
        request["quantization_config"] = models.ScalarQuantization(
            scalar=models.ScalarQuantizationConfig(type=models.ScalarType.INT8, always_ram=True)
        )
    return request


def check_reachable(url: str, timeout: float = CONNECT_TIMEOUT_S) -> None:
    """Fail in seconds when nothing listens at ``url`` (instead of a client waiting on retries)."""
    parts = urlsplit(url if "://" in url else f"http://{url}")
    host = parts.hostname
    port = parts.port or (443 if parts.scheme == "https" else 6333)
    if not host:
        raise BadInputError(f"--qdrant-url {url!r} is not a URL: use e.g. http://HOST:6333.")
    reason = unreachable_reason(host, port, timeout)
    if reason is not None:
        raise IndexFolderError(
            f"Cannot reach the Qdrant server at {url} ({host}:{port}: {reason}). Check that the "
            "server is running and that this machine can reach it (host, port, firewall), then --qdrant-url."
        )


class EdgeShard:
    """Transport: a Qdrant shard in this process (qdrant-edge-py), stored in INDEX_DIR/qdrant."""

    def __init__(self, index_dir: Path, dimension: int):
        import qdrant_edge as edge

        self.edge = edge
        self.folder = Path(index_dir) / SHARD_DIR
        config = edge.EdgeConfig(vectors=edge.EdgeVectorParams(size=dimension, distance=edge.Distance.Dot))
        try:
            if self.folder.exists():
                self.shard = edge.EdgeShard.load(str(self.folder), config)
            else:
                self.shard = edge.EdgeShard.create(str(self.folder), config)
                self.shard.update(edge.UpdateOperation.create_field_index("source", edge.PayloadSchemaType.Keyword))
        except Exception as error:  # the engine raises plain Exception with its own message
            message = str(error)
            if "WouldBlock" in message or "lock" in message.lower():
                raise IndexFolderError(f"The Qdrant shard {self.folder} is open in another process.") from error
            raise IndexFolderError(
                f"Cannot open the Qdrant shard {self.folder} as {dimension}-d vectors: {message}. If the index "
                "was built with another model, pass that --model or re-index with --rebuild."
            ) from error

    def upsert(self, ids: list[int], vectors: np.ndarray, payloads: Sequence[dict]) -> None:
        points = [self.edge.Point(id=i, vector=v.tolist(), payload=p) for i, v, p in zip(ids, vectors, payloads)]
        self.shard.update(self.edge.UpdateOperation.upsert_points(points))

    def delete(self, ids: list[int]) -> None:
        self.shard.update(self.edge.UpdateOperation.delete_points(ids))

    def scroll(self, offset, limit: int):
        request = self.edge.ScrollRequest(offset=offset, limit=limit, with_payload=False, with_vector=False)
        return self.shard.scroll(request)

    def query(self, vector: np.ndarray, k: int, sources: list[str] | None):
        edge = self.edge
        query_filter = None
        if sources is not None:
            query_filter = edge.Filter(must=[edge.FieldCondition(key="source", match=edge.MatchAny(sources))])
        return self.shard.query(
            edge.QueryRequest(limit=k, query=edge.Query.Nearest(vector.tolist()), filter=query_filter)
        )

    def flush(self) -> None:
        self.shard.flush()

    def optimize(self) -> None:
        """Build the HNSW graph where the engine's optimizer wants to."""
        self.shard.optimize()

    def close(self) -> None:
        self.shard.close()

    def drop(self) -> None:
        self.shard.close()
        shutil.rmtree(self.folder, ignore_errors=True)


def connect(url: str, api_key: str | None):
    """A QdrantClient for ``url``, after checking in seconds that a server listens there."""
    from qdrant_client import QdrantClient

    check_reachable(url)
    return QdrantClient(url=url, api_key=api_key or os.environ.get("QDRANT_API_KEY"), timeout=REQUEST_TIMEOUT_S)


class ServerCollection:
    """Transport: a collection on a Qdrant server or cluster, through qdrant-client."""

    def __init__(
        self,
        url: str,
        api_key: str | None,
        collection: str,
        dimension: int,
        client=None,
        options: CollectionOptions = CollectionOptions(),
        create: bool = True,
    ):
        from qdrant_client import models

        self.models = models
        self.collection = collection
        self.options = options
        # an existing QdrantClient (tests pass QdrantClient(":memory:")), or one for the URL
        self.client = client if client is not None else connect(url, api_key)
        if not create:  # a Ray worker writing into the collection the driver opened
            return
        try:
            exists = self.client.collection_exists(collection)
        except Exception as error:
            raise IndexFolderError(
                f"Cannot reach the Qdrant server at {url}: {error}. Check --qdrant-url and --qdrant-api-key "
                "(or QDRANT_API_KEY)."
            ) from error
        if not exists:
            self.client.create_collection(**collection_request(collection, dimension, options, models))
            self.client.create_payload_index(collection, "source", models.PayloadSchemaType.KEYWORD)
        else:
            size = getattr(self.client.get_collection(collection).config.params.vectors, "size", None)
            if size != dimension:
                raise IndexFolderError(
                    f"Qdrant collection '{collection}' at {url} holds {size}-d vectors but this encoder makes "
                    f"{dimension}-d ones. Use another --qdrant-collection, the model that built it, or --rebuild."
                )

    def upsert(self, ids: list[int], vectors: np.ndarray, payloads: Sequence[dict]) -> None:
        """Batched: one request per ``UPSERT_BATCH`` points; ids are content-derived, so a retried
        batch overwrites its own points instead of adding copies."""
        for start in range(0, len(ids), UPSERT_BATCH):
            points = [
                self.models.PointStruct(id=i, vector=v.tolist(), payload=p)
                for i, v, p in zip(
                    ids[start : start + UPSERT_BATCH],
                    vectors[start : start + UPSERT_BATCH],
                    payloads[start : start + UPSERT_BATCH],
                )
            ]
            self.client.upsert(self.collection, points=points, wait=True)

    def delete(self, ids: list[int]) -> None:
        self.client.delete(self.collection, points_selector=self.models.PointIdsList(points=ids), wait=True)

    def scroll(self, offset, limit: int):
        return self.client.scroll(self.collection, limit=limit, offset=offset, with_payload=False, with_vectors=False)

    def query(self, vector: np.ndarray, k: int, sources: list[str] | None):
        models = self.models
        query_filter = None
        if sources is not None:
            query_filter = models.Filter(must=[models.FieldCondition(key="source", match=models.MatchAny(any=sources))])
        return self.client.query_points(
            self.collection, query=vector.tolist(), limit=k, query_filter=query_filter
        ).points

    def flush(self) -> None:
        pass  # upserts wait for the server

    def optimize(self) -> None:
        pass  # the server builds its own HNSW graph

    def close(self) -> None:
        self.client.close()

    def drop(self) -> None:
        if self.client.collection_exists(self.collection):
            self.client.delete_collection(self.collection)
        self.client.close()


class QdrantStore:
    """A ``VectorStore`` (see base.py) over either transport, kept in step with ``catalog``.

    ``transport`` is None when the store cannot be used right now (an index run holds the
    embedded shard); search then answers None and the caller searches the catalog exactly.
    """

    def __init__(
        self, transport, description: dict, dimension: int, catalog=None, lock=None, fallback_reason: str | None = None
    ):
        self.transport = transport
        self.dimension = dimension
        self.description = description
        self.catalog = catalog
        self.lock = lock
        self.fallback_reason = fallback_reason

    @classmethod
    def open(cls, index_dir: Path, catalog, options, dimension: int, for_search: bool = False) -> QdrantStore:
        """The store ``options`` name: a server collection (``qdrant_url``) or the embedded shard.

        For search, the embedded shard is opened under the index lock (held until ``close()``);
        while an index run holds it, the store is returned unusable with ``fallback_reason``.
        """
        if options.qdrant_url:
            return cls.server(
                options.qdrant_url,
                options.qdrant_api_key,
                options.qdrant_collection,
                dimension,
                catalog=catalog,
                collection_options=CollectionOptions.of(options),
            )
        description = {"qdrant": "embedded"}
        lock = None
        if for_search:
            try:
                lock = hold_index_lock(index_dir, 0)
            except IndexBusyError:
                return cls(None, description, dimension, catalog, fallback_reason=BUSY_NOTE)
        try:
            return cls(EdgeShard(index_dir, dimension), description, dimension, catalog, lock)
        except BaseException:
            if lock is not None:
                lock.release()
            raise

    @classmethod
    def server(
        cls,
        url: str,
        api_key: str | None,
        collection: str,
        dimension: int,
        client=None,
        catalog=None,
        collection_options: CollectionOptions = CollectionOptions(),
    ) -> QdrantStore:
        transport = ServerCollection(url, api_key, collection, dimension, client, collection_options)
        description = {"qdrant_url": url, "qdrant_collection": collection, **collection_options.recorded()}
        return cls(transport, description, dimension, catalog)

    @classmethod
    def wipe(cls, index_dir: Path, options, dimension: int, drop_server_collection: bool) -> None:
        """A rebuild: the embedded shard goes; with ``drop_server_collection``, the points of the
        server collection ``options`` name too."""
        cls.wipe_local(index_dir)
        if drop_server_collection and options.qdrant_url:
            cls.open(index_dir, None, options, dimension).drop()

    @staticmethod
    def wipe_local(index_dir: Path) -> None:
        shutil.rmtree(Path(index_dir) / SHARD_DIR, ignore_errors=True)

    # ------------------------------------------------------------------ point operations
    def upsert(self, ids: Sequence[int], vectors: np.ndarray, payloads: Sequence[dict]) -> None:
        if len(ids):
            self.transport.upsert([int(i) for i in ids], vectors, payloads)

    def delete(self, ids: Sequence[int]) -> None:
        if len(ids):
            self.transport.delete([int(i) for i in ids])

    def all_ids(self) -> set[int]:
        found: set[int] = set()
        offset = None
        while True:
            points, offset = self.transport.scroll(offset, SCROLL_PAGE)
            found.update(int(point.id) for point in points)
            if offset is None:
                return found

    def point_count(self) -> int:
        return len(self.all_ids())

    def flush(self, optimize: bool = False) -> None:
        """Make upserts and deletes durable; ``optimize`` also builds the embedded engine's HNSW graph."""
        self.transport.flush()
        if optimize:
            self.transport.optimize()

    def drop(self) -> None:
        """Delete every point: the server collection, or the embedded shard's folder."""
        self.transport.drop()
        self.transport = None

    # ------------------------------------------------------------------ VectorStore
    def describe(self) -> dict:
        return dict(self.description)

    def ensure_empty(self) -> None:
        points, _ = self.transport.scroll(None, 1)
        if points:
            collection = self.description.get("qdrant_collection")
            where = f"collection '{collection}'" if collection else f"shard {self.transport.folder}"
            raise IndexFolderError(
                f"Qdrant {where} already holds points that this index folder did not write. "
                "Use another --qdrant-collection or pass --rebuild."
            )

    def repair(self) -> str | None:
        """Bring a lagging store back to the catalog (a previous run was killed)."""
        catalog = self.catalog
        if catalog.store_generation == catalog.generation:
            return None
        catalog_ids, _ = catalog.vectors(dimension=self.dimension)
        wanted = set(catalog_ids.tolist())
        present = self.all_ids()
        stray, missing = sorted(present - wanted), sorted(wanted - present)
        self.delete(stray)
        if missing:
            ids, vectors = catalog.vectors(missing, self.dimension)
            self.upsert(ids.tolist(), vectors, catalog.payloads(ids.tolist()))
        self.sync()
        return f"Qdrant store repaired: {len(stray)} stray points removed, {len(missing)} missing points restored"

    def apply(
        self, removed: Sequence[int], added: Sequence[int], vectors: np.ndarray, payloads: Sequence[dict]
    ) -> None:
        # A chunk unchanged within a changed file keeps its (content-derived) id: it is overwritten, not deleted.
        self.delete(sorted(set(removed) - set(added)))
        self.upsert(added, vectors, payloads)

    def sync(self) -> None:
        self.flush()
        self.catalog.set_store_generation(self.catalog.generation)

    def finish(self, previous: dict | None) -> None:
        self.flush(optimize=True)
        self.catalog.set_store_generation(self.catalog.generation)

    def place_on_gpu(self, device: int) -> str | None:
        return None  # Qdrant places its own search (a server's GPU build, or the embedded CPU one)

    def search(self, vector: np.ndarray, k: int, sources: Sequence[str] | None) -> list[tuple[int, float]] | None:
        if self.transport is None:
            return None
        if self.catalog is not None and self.catalog.store_generation != self.catalog.generation:
            self.fallback_reason = LAG_NOTE
            return None
        if sources is not None and not sources:
            return []
        import numpy as np

        points = self.transport.query(np.asarray(vector, np.float32), k, None if sources is None else list(sources))
        return [(int(point.id), float(point.score)) for point in points]

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()
            self.transport = None
        if self.lock is not None:
            self.lock.release()
            self.lock = None
