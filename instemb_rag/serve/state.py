"""What the server's endpoints share: its options (limits, API key, batching) and its state (the
encoder's batcher, the optional index on its own thread)."""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from ..encoder.protocol import LocalEncoder
from .batching import BatchingOptions, DynamicBatcher

__all__ = ["ServeOptions", "ServerState", "settle_the_heap"]


@dataclass
class ServeOptions:
    model_id: str = "instemb-default"
    max_inputs: int = 256  # inputs per /v1/embeddings request
    max_chars: int = 32_768  # characters per input (and per instruction, and per search query)
    max_k: int = 100  # hits per /v1/search request
    api_key: str | None = None  # Bearer key; None = open
    batching: BatchingOptions = field(default_factory=BatchingOptions)

    @property
    def max_body_bytes(self) -> int:
        """A request body no valid request can exceed (UTF-8 JSON, escapes included) + 1 MiB."""
        return self.max_inputs * self.max_chars * 6 * 2 + (1 << 20)


class ServerState:
    """What the endpoints share: the encoder's batcher, the optional index and its thread."""

    def __init__(
        self,
        encoder: LocalEncoder,
        options: ServeOptions,
        index=None,
        index_thread: ThreadPoolExecutor | None = None,
        batcher: DynamicBatcher | None = None,
    ):
        self.encoder = encoder
        self.options = options
        self.index = index
        # One batcher per encoder: the resident query process gives the states of several indexes
        # built with one model the same batcher (and closes it itself), so their queries share passes.
        self.batcher = batcher or DynamicBatcher(encoder, options.batching)
        # The catalog's SQLite connection belongs to the thread that opened the index.
        self.index_thread = index_thread or ThreadPoolExecutor(max_workers=1, thread_name_prefix="instemb-index")
        self.created = int(time.time())
        self.in_flight = 0

    @classmethod
    def open(cls, options: ServeOptions, model: str | None = None, index_dir=None, device: str = "auto") -> ServerState:
        """Load the encoder (the index's own when an index is given) and open the index."""
        if index_dir is None:
            from ..encoder import load_model

            return cls(load_model(model, device=device), options)
        from ..index import Index
        from ..index.manifest import model_label

        index_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="instemb-index")
        try:
            index = index_thread.submit(
                Index.open, index_dir, model=model and model_label(model), device=device
            ).result()
        except BaseException:
            index_thread.shutdown()
            raise
        return cls(index.encoder, options, index, index_thread)

    async def on_index_thread(self, fn, *args):
        return await asyncio.get_running_loop().run_in_executor(self.index_thread, fn, *args)

    def close(self) -> None:
        self.batcher.close()
        if self.index is not None:
            self.index_thread.submit(self.index.close).result()
        self.index_thread.shutdown()


def settle_the_heap() -> None:
    """After a model or an index is loaded (a server, the resident query process): collect once,
    then freeze what is left (the model's hundreds of thousands of objects), so that the
    collections a query's allocations trigger do not walk them again: an unfrozen heap made some
    warm queries wait 0.3-0.5 s for a collection."""
    import gc

    gc.collect()
    gc.freeze()
