"""What an application that embeds through instemb-rag holds beside the encoder (the LlamaIndex
integration is one such application; it adds LlamaIndex's types and events and nothing else):

    remote.py    RemoteEncoder: a running `instemb-rag serve` as an Encoder (encoder/protocol.py),
                 over HTTP, without torch
    embedder.py  Embedder: an encoder (local or remote) behind one lock, with the query and
                 document caches, the truncation warning and the document instruction; an
                 embedding call's inputs enter through it, checked once (queries.py)
    caches.py    the query LRU and the document key-value cache, keyed on what shapes a vector
    limits.py    how much text the encoder reads, and the warning when a text is longer
    sources.py   which encoder an application embeds with, opened once (open_encoder)
    carried.py   InstructedText: a query string carrying its instruction and knobs
    adapters.py  what a framework's classes share: Closes, in_worker_thread, delegated, a sync
                 client as an async one, the Qdrant client pair of an application's store

Nothing here loads torch or a model: a local encoder is handed in. The modules are imported by
name (``from instemb_rag.client.remote import RemoteEncoder``), so that this package's own
import needs neither httpx nor numpy.
"""
