"""The options of an index run, and the one place that checks them.

``IndexOptions`` (the run: folder, chunking, batching, the model's label, ``ray``),
``RayOptions`` (`index --ray`), ``StoreOptions`` (which vector store and its settings) and
``CollectionOptions`` (a new Qdrant server collection's layout). ``resolve_options`` decides the
store of a run: the options for a new index (bad values are ``BadInputError``), the manifest's
for an existing one (asking for another store is refused).

Light on purpose (no faiss, no qdrant, no torch): the command line and the Ray driver build
these before any store or model loads.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace
from enum import Enum
from pathlib import Path

from ..choices import FaissIndexKind, QdrantQuantization, StoreKind, values
from .errors import BadInputError, IndexFolderError
from .manifest import MANIFEST_FILE, Manifest
from .selection import FileSelection

__all__ = [
    "DEFAULT_COLLECTION",
    "DEFAULT_MAX_FILE_BYTES",
    "STORE_KINDS",
    "CollectionOptions",
    "IndexOptions",
    "RayOptions",
    "StoreOptions",
    "parse_choice",
    "resolve_options",
]

STORE_KINDS = values(StoreKind)
DEFAULT_COLLECTION = "instemb"
DEFAULT_MAX_FILE_BYTES = 20 * 1024 * 1024


@dataclass(frozen=True)
class CollectionOptions:
    """How a new server collection is laid out (Qdrant distributed mode). None: the server's default.

    shard_number: shards the points are split over (spread across the cluster's nodes);
    replication_factor: copies of each shard; write_consistency_factor: replicas that must
    acknowledge a write; on_disk: vectors memory-mapped from disk instead of RAM;
    quantization "int8": scalar int8 copies of the vectors kept in RAM for search (4x smaller),
    the float32 originals used to rescore."""

    shard_number: int | None = None
    replication_factor: int | None = None
    write_consistency_factor: int | None = None
    on_disk: bool = False
    quantization: str = "none"

    def recorded(self) -> dict:
        """The non-default options, as the manifest records them."""
        default = CollectionOptions()
        return {key: value for key, value in asdict(self).items() if value != getattr(default, key)}

    @classmethod
    def from_recorded(cls, recorded: dict) -> CollectionOptions:
        return cls(**{key: recorded[key] for key in asdict(cls()) if key in recorded})


@dataclass
class StoreOptions:
    store: str | None = None  # faiss | qdrant; None: the manifest's store, or faiss for a new index
    faiss_index: str | None = None  # flat | hnsw | ivf; None: the manifest's, or flat
    qdrant_url: str | None = None  # None: embedded shard in the index folder
    qdrant_api_key: str | None = None
    qdrant_collection: str = DEFAULT_COLLECTION
    # Layout of a new server collection (CollectionOptions; recorded in the manifest)
    shard_number: int | None = None
    replication_factor: int | None = None
    write_consistency_factor: int | None = None
    on_disk: bool = False
    quantization: str = "none"

    def collection_options(self) -> CollectionOptions:
        return CollectionOptions(**{f.name: getattr(self, f.name) for f in fields(CollectionOptions)})

    @classmethod
    def from_manifest(
        cls, manifest: Manifest, qdrant_url: str | None = None, qdrant_api_key: str | None = None
    ) -> StoreOptions:
        """The options an existing index was built with (a server URL can be overridden)."""
        recorded = manifest.store_options
        return cls(
            store=manifest.store,
            faiss_index=recorded.get("faiss_index"),
            qdrant_url=qdrant_url or recorded.get("qdrant_url"),
            qdrant_api_key=qdrant_api_key,
            qdrant_collection=recorded.get("qdrant_collection", DEFAULT_COLLECTION),
            **vars(CollectionOptions.from_recorded(recorded)),
        )


def parse_choice(enum_type: type[Enum], value, field: str, error_type: type[Exception] = BadInputError) -> str:
    """``value`` as one of ``enum_type``'s values, or ``error_type`` naming ``field`` and the choices."""
    try:
        return enum_type(value).value
    except ValueError:
        choices = ", ".join(member.value for member in enum_type)
        raise error_type(f"{field} must be one of {choices}, got {value!r}") from None


def resolve_options(options: StoreOptions, manifest: Manifest | None, index_dir: Path) -> StoreOptions:
    """The store of a new index (the options, default faiss/flat) or of an existing one (its
    manifest's; asking for another store is refused), with every choice checked."""
    if manifest is None:
        store = parse_choice(StoreKind, options.store or "faiss", "--store")
        faiss_index = parse_choice(FaissIndexKind, options.faiss_index or "flat", "--faiss-index")
        quantization = parse_choice(QdrantQuantization, options.quantization or "none", "--qdrant-quantization")
        for name in ("shard_number", "replication_factor", "write_consistency_factor"):
            if getattr(options, name) is not None and getattr(options, name) < 1:
                raise BadInputError(f"{name} must be at least 1, got {getattr(options, name)}")
        return replace(options, store=store, faiss_index=faiss_index, quantization=quantization)
    store = parse_choice(StoreKind, manifest.store, f"{index_dir / MANIFEST_FILE}: store", IndexFolderError)
    if options.store and parse_choice(StoreKind, options.store, "--store") != store:
        raise IndexFolderError(
            f"The index in {index_dir} uses --store {store}; to switch to {StoreKind(options.store).value}, "
            "pass --rebuild (re-embeds everything) or use another --index-dir."
        )
    faiss_index = parse_choice(
        FaissIndexKind, options.faiss_index or manifest.store_options.get("faiss_index", "flat"), "--faiss-index"
    )
    # the collection exists: its layout is the one recorded when it was created
    layout = vars(CollectionOptions.from_recorded(manifest.store_options))
    return replace(options, store=store, faiss_index=faiss_index, **layout)


@dataclass
class RayOptions:
    """How `index --ray` runs. ``encoder_kwargs`` are what each actor loads its encoder with
    (``encoder.load_model``: ``path``, the model reference, never the model, and its options)."""

    address: str | None = None  # None / "local": start a local Ray runtime; "auto", "HOST:PORT", "ray://HOST:PORT"
    workers: int | None = None  # encoder actors; None: one per GPU, else one per CPU left after the readers
    gpus_per_worker: float | None = None  # None: 1 where the cluster has GPUs, else 0 (CPU actors)
    cpus_per_worker: float = 1.0
    files_per_task: int = 8  # files read and split per Ray Data task
    encoder_kwargs: dict = field(default_factory=dict)


@dataclass
class IndexOptions:
    index_dir: Path = Path(".instemb")
    stores: StoreOptions = field(default_factory=StoreOptions)
    chunk_size: int | None = (
        None  # tokens of what embeds documents; None: 256, or the document sentence encoder's limit
    )
    chunk_overlap: int = 32
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES
    rebuild: bool = False
    wait_seconds: float = 0.0
    batch_size: int = 16
    model_label: str = "default"
    ray: RayOptions | None = None  # embed on a Ray cluster (ray_embedding.py); None: in this process
    selection: FileSelection = field(default_factory=FileSelection)  # which files are read (selection.py)
    dry_run: bool = False  # say the plan (one batch measured for the estimate) and change nothing
