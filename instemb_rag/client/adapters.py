"""What a framework's classes over an encoder or a store share, whatever the framework:

Closes              a ``with`` block closes it (``close()``)
closed_on_failure   a ``with`` block that closes what it was given if the block fails
in_worker_thread    the async twin of a sync method, run in a worker thread
delegated           a read-only property that answers an attribute of a member (``_embedder``)
state_without       a pydantic model's pickled state without this process's live objects
SyncInAThread       a sync client as an async one: each call in a worker thread, one at a time
open_qdrant_client, async_qdrant_client, qdrant_clients, aclose_qdrant_clients
                    a QdrantClient and its async twin over the same points (Qdrant's local
                    mode, ``:memory:`` or a path, cannot have two clients on one storage)
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import threading
from collections.abc import Callable, Collection, Iterator
from typing import Any

from typing_extensions import Self

from ..errors import InstEmbError

__all__ = [
    "Closes",
    "SyncInAThread",
    "aclose_qdrant_clients",
    "async_qdrant_client",
    "closed_on_failure",
    "delegated",
    "in_worker_thread",
    "open_qdrant_client",
    "qdrant_clients",
    "state_without",
]


class Closes:
    """A ``with`` block closes it (``close()``)."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


@contextlib.contextmanager
def closed_on_failure(opened: Any) -> Iterator[Any]:
    """Runs the block; if it fails, ``opened`` (a client, a server's encoder: None for nothing to
    close) is closed before the error goes on, so that a half-built object leaks no connection."""
    try:
        yield opened
    except BaseException:
        if opened is not None:
            opened.close()
        raise


def in_worker_thread(name: str) -> Callable[..., Any]:
    """The async twin of the sync method ``name``, in a worker thread: the encoder runs one forward
    pass at a time anyway, and the event loop is never blocked."""

    async def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        return await asyncio.to_thread(getattr(self, name), *args, **kwargs)

    return call


def delegated(member: str, name: str, doc: str | None = None, documented_by: type | None = None) -> property:
    """A read-only property answering ``self.<member>.<name>``; its doc is ``doc``, else that of
    ``documented_by.<name>`` (the member's class, whose attribute it answers)."""
    if doc is None and documented_by is not None:
        doc = inspect.getdoc(getattr(documented_by, name))
    return property(lambda self: getattr(getattr(self, member), name), doc=doc)


def state_without(state: dict[str, Any], skipped: Collection[str]) -> dict[str, Any]:
    """A pydantic model's pickled state (``BaseModel.__getstate__``) without its private attributes
    and the ``skipped`` fields (this process's live objects: handlers, stores), for a class whose
    unpickling rebuilds them from the fields (its ``__init__``)."""
    state["__pydantic_private__"] = None
    state["__dict__"] = {key: value for key, value in state["__dict__"].items() if key not in skipped}
    return state


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


def qdrant_clients(make_store: Callable[..., Any], **client_options: Any) -> tuple[Any, Any]:
    """(``make_store(client=...)`` over ``QdrantClient(**client_options)``, the client's async twin);
    the client is closed if the store cannot be made."""
    with closed_on_failure(open_qdrant_client(**client_options)) as client:
        store = make_store(client=client)
    return store, async_qdrant_client(client, **client_options)


async def aclose_qdrant_clients(client: Any, async_client: Any) -> None:
    """Close the async twin, then the client itself (whatever the twin did): a local path is then free."""
    try:
        await async_client.close()
    finally:
        client.close()


def async_qdrant_client(client: Any, **client_options: Any) -> Any:
    """The async twin of ``client``: qdrant-client's AsyncQdrantClient for a server; in local mode
    (":memory:", a path) ``client`` itself in a worker thread (SyncInAThread), since a second client
    would not see its points."""
    from qdrant_client import AsyncQdrantClient
    from qdrant_client.local.qdrant_local import QdrantLocal

    return SyncInAThread(client) if isinstance(client._client, QdrantLocal) else AsyncQdrantClient(**client_options)
