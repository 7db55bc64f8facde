"""The Qdrant store ``qdrant_vector_store()`` returns: stock async retrieval, and a close that closes.

LlamaIndex's ``QdrantVectorStore`` runs its async methods on an ``AsyncQdrantClient`` only ("Async
client is not initialized!" without one). A Qdrant server gets qdrant-client's own beside the sync
client. Qdrant's local mode (``:memory:``, a path) cannot have two clients on one storage, so there
the async methods run the sync client's in a worker thread, one at a time, never blocking the loop.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Callable

from llama_index.core.async_utils import asyncio_run
from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.vector_stores.qdrant import QdrantVectorStore


def _local_in_a_thread(async_name: str, sync_name: str) -> Callable[..., Any]:
    """The store's ``async_name``: qdrant-client's async call on a server, else ``sync_name`` in a thread."""

    async def method(self: InstEmbQdrantVectorStore, *args: Any, **kwargs: Any) -> Any:
        if not self.is_local:
            return await getattr(super(InstEmbQdrantVectorStore, self), async_name)(*args, **kwargs)

        def call() -> Any:
            with self._local_lock:
                return getattr(self, sync_name)(*args, **kwargs)

        return await asyncio.to_thread(call)

    method.__name__ = async_name
    return method


class InstEmbQdrantVectorStore(QdrantVectorStore):
    """A QdrantVectorStore whose async methods work in local mode, and which closes its clients."""

    _local_lock: Any = PrivateAttr(default_factory=threading.Lock)  # local mode: one call at a time

    aquery = _local_in_a_thread("aquery", "query")
    async_add = _local_in_a_thread("async_add", "add")
    adelete = _local_in_a_thread("adelete", "delete")
    adelete_nodes = _local_in_a_thread("adelete_nodes", "delete_nodes")
    aget_nodes = _local_in_a_thread("aget_nodes", "get_nodes")
    aclear = _local_in_a_thread("aclear", "clear")

    @property
    def is_local(self) -> bool:
        """True in Qdrant's local mode (":memory:" or a path): async calls run the sync client."""
        return self._aclient is None

    def close(self) -> None:
        """Close the clients (a local path is then free for another client); twice is harmless."""
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
