"""What a framework's classes over an encoder or a store share, whatever the framework:

Closes              a ``with`` block closes it (``close()``)
in_worker_thread    the async twin of a sync method, run in a worker thread
delegated           a read-only property that answers an attribute of a member (``_embedder``)
SyncInAThread       a sync client as an async one: each call in a worker thread, one at a time
open_qdrant_client, async_qdrant_client
                    a QdrantClient and its async twin over the same points (Qdrant's local
                    mode, ``:memory:`` or a path, cannot have two clients on one storage)
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

from typing_extensions import Self

from ..errors import InstEmbError

__all__ = ["Closes", "SyncInAThread", "async_qdrant_client", "delegated", "in_worker_thread", "open_qdrant_client"]


class Closes:
    """A ``with`` block closes it (``close()``)."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def in_worker_thread(name: str) -> Callable[..., Any]:
    """The async twin of the sync method ``name``, in a worker thread: the encoder runs one forward
    pass at a time anyway, and the event loop is never blocked."""

    async def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        return await asyncio.to_thread(getattr(self, name), *args, **kwargs)

    return call


def delegated(member: str, name: str, doc: str | None = None) -> property:
    """A read-only property answering ``self.<member>.<name>``."""
    return property(lambda self: getattr(getattr(self, member), name), doc=doc)


class SyncInAThread:
    """A sync client as an async one: each call runs the sync call in a worker thread, under a lock
    (a local Qdrant storage takes one call at a time)."""

    def __init__(self, client: Any):
        self.client, self.lock = client, threading.Lock()

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.client, name)

        def locked(*args: Any, **kwargs: Any) -> Any:
            with self.lock:
                return method(*args, **kwargs)

        async def call(*args: Any, **kwargs: Any) -> Any:
            return await asyncio.to_thread(locked, *args, **kwargs)

        return call


def open_qdrant_client(**client_options: Any) -> Any:
    """``QdrantClient(**client_options)``; a local path another client holds open is refused with what to do."""
    from qdrant_client import QdrantClient

    try:
        return QdrantClient(**client_options)
    except RuntimeError as error:
        if "already accessed" not in str(error):
            raise
        raise InstEmbError(
            f"The Qdrant folder {client_options.get('path')} is still open by another client (here or in another "
            "process): close its store first (store.close(), or a `with qdrant_vector_store(...) as store:` "
            "block), or use a Qdrant server (url=...) for concurrent access."
        ) from None


def async_qdrant_client(client: Any, **client_options: Any) -> Any:
    """The async twin of ``client``: qdrant-client's AsyncQdrantClient for a server; in local mode
    (":memory:", a path) ``client`` itself in a worker thread (SyncInAThread), since a second client
    would not see its points."""
    from qdrant_client import AsyncQdrantClient
    from qdrant_client.local.qdrant_local import QdrantLocal

    return SyncInAThread(client) if isinstance(client._client, QdrantLocal) else AsyncQdrantClient(**client_options)
