"""`instemb-rag serve`: an OpenAI-compatible embeddings endpoint that takes instructions, and
search over an index, behind FastAPI + uvicorn (install the `serve` extra).

    from instemb_rag.serve import ServeOptions, ServerState, create_app
    state = ServerState.open(ServeOptions(), index_dir=".instemb")   # loads the index's encoder
    app = create_app(state)                                          # any ASGI server runs it

app.py wires the app, routes.py holds the endpoints and their request checks, errors.py the
OpenAI-shaped errors, state.py the options and shared state, batching.py the dynamic batcher,
server.py the uvicorn runner, and schemas.py the wire contract (bodies, the API-key variable,
the base64 vector codec) that the LlamaIndex integration's remote client imports too.

The names below are imported lazily, so that a client reading ``instemb_rag.serve.schemas``
needs neither FastAPI nor torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .app import create_app
    from .batching import BatchingOptions, DynamicBatcher
    from .schemas import API_KEY_ENV
    from .state import ServeOptions, ServerState

__all__ = ["API_KEY_ENV", "BatchingOptions", "DynamicBatcher", "ServeOptions", "ServerState", "create_app"]

_HOMES = {
    "API_KEY_ENV": "schemas",
    "BatchingOptions": "batching",
    "DynamicBatcher": "batching",
    "ServeOptions": "state",
    "ServerState": "state",
    "create_app": "app",
}


def __getattr__(name: str):
    if name in _HOMES:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
    raise AttributeError(f"module 'instemb_rag.serve' has no attribute {name!r}")
