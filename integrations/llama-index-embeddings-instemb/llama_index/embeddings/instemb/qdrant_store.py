"""The Qdrant store ``qdrant_vector_store()`` returns: stock async retrieval, and a close that closes.

LlamaIndex's ``QdrantVectorStore`` runs its async methods (``aquery``, ``async_add``, ...) on an
``AsyncQdrantClient`` only, and raises "Async client is not initialized!" without one. So:

* a Qdrant **server** (``url=``, ``host=``, ``location="http://..."``) gets qdrant-client's own
  ``AsyncQdrantClient`` beside the sync client, both from the same options;
* Qdrant's **local mode** (``location=":memory:"``, ``path=...``) cannot have two clients on one
  storage (an in-memory one would see none of the other's points; a path is locked by the first
  client), so there the async methods run the sync client's methods in a worker thread, one at a
  time, and the event loop is never blocked.

``close()`` (or ``aclose()``, or a ``with`` / ``async with`` block) closes the clients the helper
opened, which frees a local ``path`` for the next client.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Callable, ClassVar

from llama_index.core.async_utils import asyncio_run
from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.vector_stores.qdrant import QdrantVectorStore


class InstEmbQdrantVectorStore(QdrantVectorStore):
    """A QdrantVectorStore whose async methods work in local mode, and which closes its clients."""

    # VectorStoreIndexBackend (retriever.py) reads this: async calls need no worker thread of its own.
    answers_async: ClassVar[bool] = True

    _local_lock: Any = PrivateAttr()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Local mode: the sync client is used from worker threads, one call at a time.
        self._local_lock = threading.Lock()

    @property
    def is_local(self) -> bool:
        """True in Qdrant's local mode (":memory:" or a path): async calls run the sync client."""
        return self._aclient is None

    async def _in_worker_thread(self, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        def call() -> Any:
            with self._local_lock:
                return method(*args, **kwargs)

        return await asyncio.to_thread(call)

    async def aquery(self, query: Any, **kwargs: Any) -> Any:
        if not self.is_local:
            return await super().aquery(query, **kwargs)
        return await self._in_worker_thread(self.query, query, **kwargs)

    async def async_add(self, nodes: Any, shard_identifier: Any = None, **kwargs: Any) -> list[str]:
        if not self.is_local:
            return await super().async_add(nodes, shard_identifier=shard_identifier, **kwargs)
        return await self._in_worker_thread(self.add, nodes, shard_identifier=shard_identifier, **kwargs)

    async def adelete(self, ref_doc_id: str, shard_identifier: Any = None, **delete_kwargs: Any) -> None:
        if not self.is_local:
            return await super().adelete(ref_doc_id, shard_identifier=shard_identifier, **delete_kwargs)
        return await self._in_worker_thread(self.delete, ref_doc_id, shard_identifier=shard_identifier, **delete_kwargs)

    async def adelete_nodes(self, node_ids: Any = None, filters: Any = None, **delete_kwargs: Any) -> None:
        if not self.is_local:
            return await super().adelete_nodes(node_ids, filters, **delete_kwargs)
        return await self._in_worker_thread(self.delete_nodes, node_ids, filters, **delete_kwargs)

    async def aget_nodes(self, node_ids: Any = None, filters: Any = None, **kwargs: Any) -> Any:
        if not self.is_local:
            return await super().aget_nodes(node_ids, filters, **kwargs)
        return await self._in_worker_thread(self.get_nodes, node_ids, filters, **kwargs)

    async def aclear(self) -> None:
        if not self.is_local:
            return await super().aclear()
        return await self._in_worker_thread(self.clear)

    # ------------------------------------------------------------------ lifetime
    def close(self) -> None:
        """Close the clients (a local path is then free for another client). Safe to call twice."""
        try:
            if self._aclient is not None:
                asyncio_run(self._aclient.close())  # LlamaIndex's runner also works inside a running loop
        finally:
            self._client.close()

    async def aclose(self) -> None:
        try:
            if self._aclient is not None:
                await self._aclient.close()
        finally:
            self._client.close()

    def __enter__(self) -> InstEmbQdrantVectorStore:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    async def __aenter__(self) -> InstEmbQdrantVectorStore:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()
