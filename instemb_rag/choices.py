"""The closed sets of choices shared by the library and the command line, as enums.

Kept free of heavy imports (torch, faiss) so that `instemb-rag --help` and option parsing stay
fast; typer shows and checks these as choices, and the library accepts either the enum or its
string value.
"""

from __future__ import annotations

from enum import Enum

__all__ = [
    "ExportFormat",
    "FacetBaseline",
    "FaissIndexKind",
    "HybridMode",
    "ParallelMode",
    "PoolingMode",
    "Precision",
    "QdrantQuantization",
    "SteeringSplit",
    "StoreKind",
    "SUPPORTED_SUFFIXES",
    "supported_types",
    "values",
]


class StoreKind(str, Enum):
    """The built-in vector stores, each a module of index/stores/ (its registry, registry.py, reads
    this list): faiss (FAISS file + SQLite catalog) or qdrant (embedded, or a server with
    --qdrant-url). ``--store`` takes any registered store (``registry.StoreKind``: these and any
    a plugin registers)."""

    faiss = "faiss"
    qdrant = "qdrant"


class FaissIndexKind(str, Enum):
    """``--faiss-index``: flat (exact), hnsw or ivf (approximate, for large corpora)."""

    flat = "flat"
    hnsw = "hnsw"
    ivf = "ivf"


class QdrantQuantization(str, Enum):
    """``--qdrant-quantization``: none, or int8 (Qdrant scalar quantization of a server collection)."""

    none = "none"
    int8 = "int8"


class PoolingMode(str, Enum):
    """``--pooling``: how hidden states become one embedding (instemb_rag/encoder/modules/pooling.py)."""

    daap = "daap"
    input_last = "input_last"
    special_first = "special_first"
    special_mean = "special_mean"
    all_mean = "all_mean"


class SteeringSplit(str, Enum):
    """``eval --split``: which groups the steering tasks score (instemb_rag/eval/steering.py)."""

    heldout = "heldout"
    train = "train"


class HybridMode(str, Enum):
    """``query --hybrid``, ``eval --hybrid``: how the dense and full-text rankings are fused
    (instemb_rag/index/fusion.py): rrf (reciprocal ranks) or z (standardised scores)."""

    rrf = "rrf"
    z = "z"


class FacetBaseline(str, Enum):
    """``eval facet-groups --baseline``: non-neural rankers scored beside the model (instemb_rag/eval/facet_runs.py)."""

    bm25 = "bm25"


class Precision(str, Enum):
    """``--precision`` and ``precision=``: fp32 (default), or int8 (dynamic int8 linear layers on the
    CPU, inference only; instemb_rag/encoder/quantize.py)."""

    fp32 = "fp32"
    int8 = "int8"


class ExportFormat(str, Enum):
    """``export --format``: instemb (a checkpoint's encoder files) or sentence-transformers (any
    model folder, or the shipped default, as a copy that loads as a SentenceTransformer;
    instemb_rag/interop/export.py)."""

    instemb = "instemb"
    sentence_transformers = "sentence-transformers"


class ParallelMode(str, Enum):
    """``--parallel`` (under torchrun): ddp replicates the model on every rank; fsdp shards the
    decoder layers (full shard, bf16 compute) for models that do not fit one device."""

    ddp = "ddp"
    fsdp = "fsdp"


def values(enum_type: type[Enum]) -> tuple[str, ...]:
    return tuple(member.value for member in enum_type)


# The file types `instemb-rag index` reads, grouped by the reader that reads them
# (index/documents.py); `index --help` and the skip message of any other type name them from here.
TEXT_SUFFIXES = frozenset({".txt", ".md", ".markdown", ".rst", ".text"})
MARKUP_SUFFIXES = frozenset({".html", ".htm"})
STRUCTURED_SUFFIXES = frozenset({".json", ".jsonl", ".csv"})  # data files: read only when --include names them
PDF_SUFFIXES = frozenset({".pdf"})
SUPPORTED_SUFFIXES = TEXT_SUFFIXES | MARKUP_SUFFIXES | STRUCTURED_SUFFIXES | PDF_SUFFIXES


def supported_types() -> str:
    """The supported file types, as the help and the skip message both name them."""
    return ", ".join(sorted(SUPPORTED_SUFFIXES))
