"""The Qdrant store ``qdrant_vector_store()`` returns: LlamaIndex's async calls work, and close() closes.

LlamaIndex's ``QdrantVectorStore`` runs its async methods on an ``AsyncQdrantClient`` only; the
client pair comes from instemb_rag.client.adapters (in Qdrant's local mode the async client runs
the sync client's calls in a worker thread)."""

from __future__ import annotations

from functools import partial
from typing import Any

from llama_index.core.async_utils import asyncio_run
from llama_index.vector_stores.qdrant import QdrantVectorStore

from instemb_rag.client.adapters import Closes, SyncInAThread, aclose_qdrant_clients, qdrant_clients


class InstEmbQdrantVectorStore(Closes, QdrantVectorStore):
    """A QdrantVectorStore whose async methods work in local mode too, and which closes its clients."""

    @classmethod
    def open(cls, collection_name: str, **client_options: Any) -> InstEmbQdrantVectorStore:
        """A store on ``QdrantClient(**client_options)``; LlamaIndex makes the collection."""
        store, store._aclient = qdrant_clients(partial(cls, collection_name=collection_name), **client_options)
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
        await aclose_qdrant_clients(self._client, self._aclient)

    async def __aenter__(self) -> InstEmbQdrantVectorStore:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()
