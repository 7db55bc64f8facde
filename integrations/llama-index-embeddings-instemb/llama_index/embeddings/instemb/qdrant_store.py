"""The Qdrant store ``qdrant_vector_store()`` returns: LlamaIndex's async calls work, and close() closes.

LlamaIndex's ``QdrantVectorStore`` runs its async methods on an ``AsyncQdrantClient`` only. A Qdrant
server gets qdrant-client's own; Qdrant's local mode (``:memory:``, a path) cannot have two clients
on one storage, so there the async client runs the sync client's calls in a worker thread."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from llama_index.core.async_utils import asyncio_run
from llama_index.vector_stores.qdrant import QdrantVectorStore
from qdrant_client import AsyncQdrantClient, QdrantClient
from qdrant_client.local.qdrant_local import QdrantLocal

from instemb_rag.errors import InstEmbError

from .base import Closes


class SyncInAThread:
    """A local QdrantClient as an async one: each call runs the sync call in a worker thread, under a
    lock (the local storage takes one call at a time)."""

    def __init__(self, client: QdrantClient):
        self.client, self.lock = client, threading.Lock()

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.client, name)

        def locked(*args: Any, **kwargs: Any) -> Any:
            with self.lock:
                return method(*args, **kwargs)

        async def call(*args: Any, **kwargs: Any) -> Any:
            return await asyncio.to_thread(locked, *args, **kwargs)

        return call


class InstEmbQdrantVectorStore(Closes, QdrantVectorStore):
    """A QdrantVectorStore whose async methods work in local mode too, and which closes its clients."""

    @classmethod
    def open(cls, collection_name: str, **client_options: Any) -> InstEmbQdrantVectorStore:
        """A store on ``QdrantClient(**client_options)``; LlamaIndex makes the collection."""
        try:
            client = QdrantClient(**client_options)
        except RuntimeError as error:
            if "already accessed" not in str(error):
                raise
            raise InstEmbError(
                f"The Qdrant folder {client_options.get('path')} is still open by another client (here or in another "
                "process): close its store first (store.close(), or a `with qdrant_vector_store(...) as store:` "
                "block), or use a Qdrant server (url=...) for concurrent access."
            ) from None
        try:
            store = cls(collection_name=collection_name, client=client)
        except BaseException:
            client.close()
            raise
        # Local mode keeps its points in this one client: a second (async) one would not see them.
        local = isinstance(client._client, QdrantLocal)
        store._aclient = SyncInAThread(client) if local else AsyncQdrantClient(**client_options)
        return store

    @property
    def is_local(self) -> bool:
        """True in Qdrant's local mode (":memory:" or a path): async calls run the sync client."""
        return isinstance(self._aclient, SyncInAThread)

    def close(self) -> None:
        """Close the clients (a local path is then free for another client); twice is harmless."""
        if self.is_local:
            self._client.close()
        else:
            asyncio_run(self.aclose())  # LlamaIndex's runner also works inside a running loop

    async def aclose(self) -> None:
        try:
            await self._aclient.close()
        finally:
            self._client.close()

    async def __aenter__(self) -> InstEmbQdrantVectorStore:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()
