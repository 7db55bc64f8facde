"""The options of an index run, and the one place that checks them.

``IndexOptions`` (the run: folder, chunking, batching, the model's label, ``ray``),
``RayOptions`` (`index --ray`) and ``StoreOptions`` (which vector store, and the settings of the
registered stores: stores/registry.py). ``resolve_options`` decides the store of a run: the
options for a new index (bad values are ``BadInputError``), the manifest's for an existing one
(asking for another store is refused), each setting as its registration says.

Light on purpose (no faiss, no qdrant, no torch): the command line and the Ray driver build
these before any store or model loads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from .errors import BadInputError, IndexFolderError
from .manifest import MANIFEST_FILE, Manifest
from .selection import FileSelection
from .stores.registry import (
    AS_CREATED,
    DEFAULT_STORE,
    THIS_RUN,
    StoreSetting,
    StoreSettings,
    registered_stores,
    store_registration,
    store_settings,
)

__all__ = [
    "DEFAULT_COLLECTION",  # noqa: F822 (Qdrant's, stores/qdrant.py: __getattr__ below)
    "DEFAULT_MAX_FILE_BYTES",
    "STORE_KINDS",  # noqa: F822 (read from the registry when asked: __getattr__ below)
    "CollectionOptions",  # noqa: F822 (Qdrant's, stores/qdrant.py: __getattr__ below)
    "IndexOptions",
    "RayOptions",
    "StoreOptions",
    "parse_choice",
    "resolve_options",
]

DEFAULT_MAX_FILE_BYTES = 20 * 1024 * 1024


def __getattr__(name: str):
    """Names that moved to the store that owns them, kept importable from here."""
    if name == "STORE_KINDS":  # the registered stores' names, read when asked (a plugin's included)
        return tuple(registered_stores())
    if name in ("CollectionOptions", "DEFAULT_COLLECTION"):  # Qdrant's: stores/qdrant.py
        from .stores.qdrant import DEFAULT_COLLECTION, CollectionOptions

        return {"CollectionOptions": CollectionOptions, "DEFAULT_COLLECTION": DEFAULT_COLLECTION}[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class StoreOptions(StoreSettings):
    """Which vector store (``store``: a registered name; None: the manifest's, or faiss for a new
    index) and the settings of the registered stores (stores/registry.py), each an attribute:
    ``StoreOptions(store="qdrant", qdrant_url="http://HOST:6333")``. A setting left None is not
    given (its attribute answers the registered default)."""

    store: str | None = None

    def __init__(self, store: str | None = None, **settings: Any):
        super().__init__(**settings)
        self.store = getattr(store, "value", store)

    @classmethod
    def of_index(cls, manifest: Manifest, given: StoreOptions | Mapping[str, Any] | None = None) -> StoreOptions:
        """The options an existing index was built with (the settings its manifest recorded), with
        the ``given`` settings a query may override (a store's ``at_query`` ones, e.g. a server URL)."""
        given = given.settings if isinstance(given, StoreSettings) else dict(given or {})
        settings = {}
        for setting in store_settings():
            value = given.get(setting.name) if setting.at_query else None
            settings[setting.name] = value if value is not None else manifest.store_options.get(setting.name)
        return cls(manifest.store, **settings)

    @classmethod
    def from_manifest(
        cls, manifest: Manifest, qdrant_url: str | None = None, qdrant_api_key: str | None = None
    ) -> StoreOptions:
        """Kept for callers of the older name: ``of_index`` with Qdrant's two query-time settings."""
        return cls.of_index(manifest, {"qdrant_url": qdrant_url, "qdrant_api_key": qdrant_api_key})

    def collection_options(self):
        """Kept for callers of the older name: a new Qdrant server collection's layout
        (stores/qdrant.py: ``CollectionOptions.of``)."""
        from .stores.qdrant import CollectionOptions

        return CollectionOptions.of(self)

    def __eq__(self, other) -> bool:
        return isinstance(other, StoreOptions) and (self.store, self.settings) == (other.store, other.settings)

    def __repr__(self) -> str:
        given = "".join(f", {name}={value!r}" for name, value in self.settings.items())
        return f"StoreOptions(store={self.store!r}{given})"


def parse_choice(enum_type: type[Enum], value, field: str, error_type: type[Exception] = BadInputError) -> str:
    """``value`` as one of ``enum_type``'s values, or ``error_type`` naming ``field`` and the choices."""
    try:
        return enum_type(value).value
    except ValueError:
        choices = ", ".join(member.value for member in enum_type)
        raise error_type(f"{field} must be one of {choices}, got {value!r}") from None


def checked_setting(setting: StoreSetting, value: Any) -> Any:
    """``value`` (None: the default) of ``setting``, checked against its choices and minimum."""
    value = setting.default if value is None else value
    if value is None:
        return None
    if isinstance(setting.type, type) and issubclass(setting.type, Enum):
        return parse_choice(setting.type, value, setting.flag)
    if setting.minimum is not None and value < setting.minimum:
        raise BadInputError(f"{setting.flag} must be at least {setting.minimum:g}, got {value}")
    return value


def resolve_options(options: StoreOptions, manifest: Manifest | None, index_dir: Path) -> StoreOptions:
    """The store of a new index (the options, default faiss) or of an existing one (its
    manifest's; asking for another store is refused), with every setting checked and taken as
    its registration says (``on_existing_index``)."""
    if manifest is None:
        store = store_registration(options.store or DEFAULT_STORE, "--store").name
        return StoreOptions(
            store, **{s.name: checked_setting(s, options.settings.get(s.name)) for s in store_settings()}
        )
    where = f"{index_dir / MANIFEST_FILE}: store"
    store = store_registration(manifest.store, where, IndexFolderError).name
    if options.store and store_registration(options.store, "--store").name != store:
        raise IndexFolderError(
            f"The index in {index_dir} uses --store {store}; to switch to {getattr(options.store, 'value', options.store)}, "
            "pass --rebuild (re-embeds everything) or use another --index-dir."
        )
    settings = {}
    for setting in store_settings():
        given, recorded = options.settings.get(setting.name), manifest.store_options.get(setting.name)
        if setting.on_existing_index == THIS_RUN:
            value = given
        elif setting.on_existing_index == AS_CREATED:  # the store exists: as it was made
            value = recorded
        else:
            value = given if given is not None else recorded
        settings[setting.name] = checked_setting(setting, value)
    return StoreOptions(store, **settings)


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
