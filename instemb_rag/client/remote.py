"""RemoteEncoder: the encoder API (encode_queries / encode_documents, dimension, fingerprint)
answered by a running `instemb-rag serve` over HTTP, so an app embeds without torch (httpx: the
`client` extra, or the LlamaIndex integration).

    encoder = RemoteEncoder("http://127.0.0.1:8000", api_key=None)   # INSTEMB_API_KEY by default
    encoder.encode_queries(["Which tent?"], ["focus on weight"])      # np.ndarray [1, d], L2-normed
    encoder.encode_queries(["Which tent?"], "focus on weight", **knobs)  # the model's query-time knob

It is an ``Encoder`` (encoder/protocol.py): the LlamaIndex integration's ``base_url`` embeds through
it, and any code written for an encoder runs against a server with it. What the server's model
card reports is kept: the document side's fingerprint (what the document
cache keys on) and limits, and which query-time knobs the model takes (knobs.py; a server older
than a knob reports none, and a value is then refused here rather than silently ignored there).
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Mapping
from typing import Sequence

import httpx
import numpy as np

from ..errors import InstEmbError
from ..knobs import KNOBS
from ..queries import QueryKnobs

# The server's wire contract (bodies, the API-key variable, the vector codec): one definition on
# both sides, so the client cannot drift from the server. It needs neither FastAPI nor torch.
from ..serve.schemas import API_KEY_ENV, decode_vector


class RemoteEncoder:
    """Talks to POST /v1/embeddings of an `instemb-rag serve` server (thread-safe).

    Close it (``close()``, or ``with RemoteEncoder(...) as encoder:``) to release its
    connections; one still open when it is collected or the interpreter exits is closed then,
    so an app never leaves an unclosed socket behind (ResourceWarning).
    """

    def __init__(self, base_url: str, api_key: str | None = None, timeout: float = 60.0):
        self.base_url = base_url.rstrip("/")
        if self.base_url.endswith("/v1"):
            self.base_url = self.base_url[: -len("/v1")]
        api_key = api_key if api_key is not None else os.environ.get(API_KEY_ENV)
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(base_url=self.base_url, headers=headers, timeout=timeout)
        self._closer = weakref.finalize(self, self._client.close)
        try:
            card = self._call("GET", "/v1/models")["data"][0]
        except BaseException:
            self.close()
            raise
        self.model_id: str = card["id"]
        self.dimension: int = int(card["dimension"])
        self.fingerprint: str = card["fingerprint"]
        # The document side (a server older than these fields: the model's own fingerprint).
        self.document_fingerprint: str = card.get("document_fingerprint") or self.fingerprint
        self.document_token_limit: int | None = card.get("document_token_limit")
        for knob in KNOBS:  # takes_<knob> (encoder/protocol.py query_knobs): the card lists the knobs taken
            setattr(self, f"takes_{knob}", card.get(knob) is not None)

    def _call(self, method: str, path: str, payload: dict | None = None) -> dict:
        if self.closed:
            raise InstEmbError(
                f"The connection to the instemb-rag server at {self.base_url} is closed: make a new "
                "InstEmbEmbedding(base_url=...) (or use the embedding inside its `with` block)."
            )
        try:
            response = self._client.request(method, path, json=payload)
        except httpx.HTTPError as error:
            raise InstEmbError(
                f"Cannot reach the instemb-rag server at {self.base_url} ({type(error).__name__}: {error}). "
                "Start it with `instemb-rag serve`, or check base_url."
            ) from None
        if response.status_code != 200:
            try:
                message = response.json()["error"]["message"]
            except (ValueError, KeyError, TypeError):
                message = response.text[:300]
            raise InstEmbError(f"The instemb-rag server at {self.base_url} answered {response.status_code}: {message}")
        return response.json()

    def embed(
        self,
        texts: Sequence[str],
        instructions: Sequence[str | None],
        input_type: str,
        batch_size: int = 64,
        knobs: Mapping[str, float] | None = None,
    ) -> np.ndarray:
        """``knobs``: a query's query-time knobs, checked (sent as the request's fields of their names)."""
        texts, instructions = list(texts), list(instructions)
        output = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for start in range(0, len(texts), max(batch_size, 1)):
            stop = start + max(batch_size, 1)
            payload = {
                "model": self.model_id,
                "input": texts[start:stop],
                "instruction": instructions[start:stop],
                "input_type": input_type,
                "encoding_format": "base64",
                **(knobs or {}),
            }
            body = self._call("POST", "/v1/embeddings", payload)
            for item in body["data"]:
                output[start + item["index"]] = decode_vector(item["embedding"])
        return output

    def encode_queries(
        self,
        queries: Sequence[str],
        instructions=None,
        batch_size: int = 64,
        **kwargs,
    ) -> np.ndarray:
        """The query-time knobs as keywords (knobs.py; None: the model's own), each refused here
        when the server's model has no such knob (this encoder's own guard, as a local encoder's:
        callers that checked them where they entered pass them on as they are)."""
        knobs = QueryKnobs.checked({name: value for name, value in kwargs.items() if name in KNOBS}).require(self)
        queries = list(queries)
        if instructions is None or isinstance(instructions, str):
            instructions = [instructions or None] * len(queries)
        per_item = [item or None for item in instructions]
        return self.embed(queries, per_item, "query", batch_size, knobs)

    def encode_documents(
        self, documents: Sequence[str], instruction: str | None = None, batch_size: int = 64, **_
    ) -> np.ndarray:
        documents = list(documents)
        return self.embed(documents, [instruction or None] * len(documents), "document", batch_size)

    @property
    def closed(self) -> bool:
        return self._client.is_closed

    def close(self) -> None:
        self._closer()  # closes the client once; later calls do nothing

    def __enter__(self) -> RemoteEncoder:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
