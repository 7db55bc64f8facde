"""`instemb-rag serve`: an OpenAI-compatible embeddings endpoint that takes instructions, and
search over an index, behind FastAPI + uvicorn (install the `serve` extra).

    from instemb_rag.serve import ServeOptions, ServerState, create_app
    state = ServerState.open(ServeOptions(), index_dir=".instemb")   # loads the index's encoder
    app = create_app(state)                                          # any ASGI server runs it

app.py holds the endpoints, batching.py the dynamic batcher, schemas.py the pydantic bodies,
server.py the uvicorn runner.
"""

from .app import API_KEY_ENV, ServeOptions, ServerState, create_app
from .batching import BatchingOptions, DynamicBatcher

__all__ = ["API_KEY_ENV", "BatchingOptions", "DynamicBatcher", "ServeOptions", "ServerState", "create_app"]
