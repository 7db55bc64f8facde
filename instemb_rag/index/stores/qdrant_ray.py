"""`index --ray` and a Qdrant server: the workers write the points themselves (content-derived
ids), into the collection the driver opened. The store's registration (qdrant.py) names both
functions here (stores/registry.py): ``worker_sink``, what the driver hands the workers (None
for the embedded shard, which the driver writes), and ``worker_writer``. Light at import."""

from __future__ import annotations

from typing import Any

__all__ = ["worker_sink", "worker_writer"]


def worker_sink(store: Any, options: Any) -> dict | None:
    """The sink of a server collection (``store``: a QdrantStore; ``options``: the run's
    StoreOptions, for the URL and key), else None."""
    from .qdrant import ServerCollection

    if not isinstance(store.transport, ServerCollection):
        return None
    url, key = options.qdrant_url, options.qdrant_api_key
    return {"store": "qdrant", "url": url, "api_key": key, "collection": store.transport.collection}


def worker_writer(sink: dict, dimension: int):
    """In a Ray worker: the server collection ``sink`` names, never created here."""
    from .qdrant import ServerCollection

    return ServerCollection(
        sink["url"], sink.get("api_key"), sink["collection"], dimension, client=sink.get("client"), create=False
    )
