"""Qdrant vector store: embedded on disk (qdrant-edge-py) or a server/cluster (qdrant-client).

Why two clients: on 10,000 random 576-d vectors with a payload filter, qdrant-client's
local mode (pure Python) answers in ~230 ms per query, qdrant-edge-py (the Qdrant engine
in-process) in ~1 ms (benchmarks/bench_qdrant_embedded.py), so the embedded default uses
the engine and `--qdrant-url` uses qdrant-client. Both hold point id = catalog chunk id and
payload {source, position}; text stays in the catalog, which remains the source of truth.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from .errors import IndexFolderError

SHARD_DIR = "qdrant"
DEFAULT_COLLECTION = "instemb"
SCROLL_PAGE = 1000


class EmbeddedQdrant:
    """A Qdrant shard in this process, stored in INDEX_DIR/qdrant."""

    def __init__(self, index_dir: Path, dimension: int):
        import qdrant_edge as edge

        self.edge = edge
        self.folder = Path(index_dir) / SHARD_DIR
        self.dimension = dimension
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

    def upsert(self, ids: Sequence[int], vectors: np.ndarray, payloads: Sequence[dict]) -> None:
        if len(ids):
            points = [self.edge.Point(id=int(i), vector=v.tolist(), payload=p) for i, v, p in zip(ids, vectors, payloads)]
            self.shard.update(self.edge.UpdateOperation.upsert_points(points))

    def delete(self, ids: Sequence[int]) -> None:
        if len(ids):
            self.shard.update(self.edge.UpdateOperation.delete_points([int(i) for i in ids]))

    def all_ids(self) -> set[int]:
        found: set[int] = set()
        offset = None
        while True:
            request = self.edge.ScrollRequest(offset=offset, limit=SCROLL_PAGE, with_payload=False, with_vector=False)
            points, offset = self.shard.scroll(request)
            found.update(int(point.id) for point in points)
            if offset is None:
                return found

    def search(self, vector: np.ndarray, k: int, sources: Sequence[str] | None) -> list[tuple[int, float]]:
        edge = self.edge
        query_filter = None
        if sources is not None:
            if not sources:
                return []
            query_filter = edge.Filter(must=[edge.FieldCondition(key="source", match=edge.MatchAny(list(sources)))])
        request = edge.QueryRequest(limit=k, query=edge.Query.Nearest(vector.tolist()), filter=query_filter)
        return [(int(point.id), float(point.score)) for point in self.shard.query(request)]

    def finish(self) -> None:
        """Flush, and build the HNSW graph where the engine's optimizer wants to."""
        self.shard.flush()
        self.shard.optimize()

    def flush(self) -> None:
        self.shard.flush()

    def close(self) -> None:
        self.shard.close()

    @staticmethod
    def destroy(index_dir: Path) -> None:
        shutil.rmtree(Path(index_dir) / SHARD_DIR, ignore_errors=True)


class ServerQdrant:
    """A collection on a Qdrant server or cluster, through qdrant-client."""

    def __init__(self, url: str, api_key: str | None, collection: str, dimension: int, client=None):
        from qdrant_client import QdrantClient, models

        self.models = models
        self.collection = collection
        self.dimension = dimension
        if client is not None:  # an existing QdrantClient (tests pass QdrantClient(":memory:"))
            self.client = client
        else:
            self.client = QdrantClient(url=url, api_key=api_key or os.environ.get("QDRANT_API_KEY"))
        try:
            exists = self.client.collection_exists(collection)
        except Exception as error:
            raise IndexFolderError(
                f"Cannot reach the Qdrant server at {url}: {error}. Check --qdrant-url and --qdrant-api-key "
                "(or QDRANT_API_KEY)."
            ) from error
        if not exists:
            self.client.create_collection(
                collection, vectors_config=models.VectorParams(size=dimension, distance=models.Distance.DOT)
            )
            self.client.create_payload_index(collection, "source", models.PayloadSchemaType.KEYWORD)
        else:
            size = self._collection_size()
            if size != dimension:
                raise IndexFolderError(
                    f"Qdrant collection '{collection}' at {url} holds {size}-d vectors but this encoder makes "
                    f"{dimension}-d ones. Use another --qdrant-collection, the model that built it, or --rebuild."
                )

    def _collection_size(self) -> int | None:
        params = self.client.get_collection(self.collection).config.params.vectors
        return getattr(params, "size", None)

    def point_count(self) -> int:
        return int(self.client.count(self.collection, exact=True).count)

    def upsert(self, ids: Sequence[int], vectors: np.ndarray, payloads: Sequence[dict]) -> None:
        if len(ids):
            points = [self.models.PointStruct(id=int(i), vector=v.tolist(), payload=p) for i, v, p in zip(ids, vectors, payloads)]
            self.client.upsert(self.collection, points=points, wait=True)

    def delete(self, ids: Sequence[int]) -> None:
        if len(ids):
            selector = self.models.PointIdsList(points=[int(i) for i in ids])
            self.client.delete(self.collection, points_selector=selector, wait=True)

    def all_ids(self) -> set[int]:
        found: set[int] = set()
        offset = None
        while True:
            points, offset = self.client.scroll(
                self.collection, limit=SCROLL_PAGE, offset=offset, with_payload=False, with_vectors=False
            )
            found.update(int(point.id) for point in points)
            if offset is None:
                return found

    def search(self, vector: np.ndarray, k: int, sources: Sequence[str] | None) -> list[tuple[int, float]]:
        models = self.models
        query_filter = None
        if sources is not None:
            if not sources:
                return []
            query_filter = models.Filter(must=[models.FieldCondition(key="source", match=models.MatchAny(any=list(sources)))])
        response = self.client.query_points(self.collection, query=vector.tolist(), limit=k, query_filter=query_filter)
        return [(int(point.id), float(point.score)) for point in response.points]

    def finish(self) -> None:
        pass  # upserts wait for the server; it builds its own HNSW graph

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.client.close()

    def drop_collection(self) -> None:
        if self.client.collection_exists(self.collection):
            self.client.delete_collection(self.collection)
