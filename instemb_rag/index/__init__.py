"""Index documents once, search them with an instruction.

Build (same as `instemb-rag index docs/ --index-dir .instemb`)::

    from instemb_rag import InstEmbEncoder
    from instemb_rag.index import Indexer, IndexOptions, StoreOptions
    encoder = InstEmbEncoder.from_pretrained()
    report = Indexer(encoder, IndexOptions(index_dir=".instemb", stores=StoreOptions(store="faiss"))).run("docs/")

Search (what the LlamaIndex retriever uses)::

    from instemb_rag.index import Index
    with Index.open(".instemb") as index:            # loads the encoder the index was built with
        hits = index.search("Which tent should I buy?", instruction="focus on packed weight",
                            k=5, filter={"source": "tents/*"})
        for hit in hits:                                 # SearchHit: score, source, position, text,
            print(hit.score, hit.source, hit.text)       # chunk_id, extra (e.g. PDF page)
    index.search(vector)                                 # a precomputed query vector works too

A model with a query-time knob (knobs.py's declarations: a two-space model's LLM share of the
score, an instruction-effect model's instruction strength) takes it per call as one mapping, with
the same stored vectors; ``explain`` says what each hit's score is made of::

        knobs = {name: value}                            # e.g. the knob GET /v1/models lists
        hits = index.search("Which tent?", "focus on packed weight", knobs=knobs)
        index.explain("Which tent?", "focus on packed weight", hits, knobs=knobs)

`Index.open(dir, encoder=enc)` reuses an encoder already loaded; its document side's fingerprint
must match the manifest's (another query side over the same documents searches the index as it is). An index folder holds manifest.json, catalog.sqlite (the source of truth:
chunks, vectors, file hashes), and either vectors-g<N>.faiss (a cache) or qdrant/ (embedded
shard); a Qdrant server index keeps its points in the named collection.
"""

from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .documents import SUPPORTED_SUFFIXES
    from .errors import BadInputError, IndexBusyError, IndexFolderError
    from .indexer import Indexer, IndexReport
    from .manifest import FORMAT_VERSION, Manifest, read_manifest
    from .options import DEFAULT_MAX_FILE_BYTES, IndexOptions, StoreOptions
    from .search import Index, SearchHit, parse_filters

# Each public name and the module that holds it, imported on first use: the CLI's client of the
# resident query process reads hits and filters (hits.py, filters.py) without loading the search
# code (faiss, numpy) or the indexer (LlamaIndex).
_HOMES = {
    "SUPPORTED_SUFFIXES": ".documents",
    "BadInputError": ".errors",
    "IndexBusyError": ".errors",
    "IndexFolderError": ".errors",
    "Indexer": ".indexer",
    "IndexReport": ".indexer",
    "FORMAT_VERSION": ".manifest",
    "Manifest": ".manifest",
    "read_manifest": ".manifest",
    "DEFAULT_MAX_FILE_BYTES": ".options",
    "IndexOptions": ".options",
    "StoreOptions": ".options",
    "Index": ".search",
    "SearchHit": ".hits",
    "parse_filters": ".filters",
}


def __getattr__(name: str):
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(_HOMES[name], __name__), name)


__all__ = [
    "BadInputError",
    "DEFAULT_MAX_FILE_BYTES",
    "FORMAT_VERSION",
    "Index",
    "IndexBusyError",
    "IndexFolderError",
    "IndexOptions",
    "IndexReport",
    "Indexer",
    "Manifest",
    "SUPPORTED_SUFFIXES",
    "SearchHit",
    "StoreOptions",
    "parse_filters",
    "read_manifest",
]
