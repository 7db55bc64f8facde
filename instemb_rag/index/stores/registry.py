"""The vector stores an index can use, registered in one place.

A store is one module under index/stores/ that declares a ``StoreRegistration``: its name
(``--store NAME``, the manifest's ``store``), its class (opened through the class methods
``open`` and ``wipe``, base.py) and its settings. A setting (``StoreSetting``) is at once an
option of `instemb-rag index` (and of `instemb-rag query` where ``at_query``), an attribute of
``StoreOptions`` and, where the store records it, a key of the manifest's ``store_options``.

The built-in stores are the modules ``choices.StoreKind`` names; another store (a plugin, a test's)
calls ``register_store`` before the command line is read. Whatever used to name a store reads
this registry: the store options of `index` and `query` (cli/store_options.py, through
``StoreKind`` here: the stores registered now), ``StoreOptions`` and ``resolve_options``
(options.py), ``open_store`` and ``wipe_index`` (stores/__init__.py), ``Index.open`` and the
resident query process.

Light on purpose (no numpy, faiss or qdrant): `instemb-rag --help` reads it. A registration names
its class as "module:Class", imported when the store is opened.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from enum import Enum
from typing import Any

from ...choices import StoreKind as BuiltInStore
from ...choices import values
from ..errors import BadInputError

__all__ = [
    "AS_CREATED",
    "BUILT_IN",
    "DEFAULT_STORE",
    "THIS_RUN",
    "THIS_RUN_ELSE_RECORDED",
    "StoreKind",  # noqa: F822 (the registered stores when asked for: __getattr__ below)
    "StoreRegistration",
    "StoreSetting",
    "StoreSettings",
    "register_store",
    "registered_stores",
    "store_registration",
    "store_settings",
    "open_worker_writer",
    "unregister_store",
    "worker_sink",
]

BUILT_IN = values(BuiltInStore)  # modules of this package, each with a REGISTRATION (choices.StoreKind)
DEFAULT_STORE = "faiss"  # the store of a new index when --store is not given

# What an `index` run over an existing index uses for a setting (``StoreSetting.on_existing_index``):
THIS_RUN = "this run"  # the run's value (or the default): e.g. which server to reach
AS_CREATED = "as created"  # the manifest's: fixed when the store was created (a collection's layout)
THIS_RUN_ELSE_RECORDED = "this run, else recorded"  # given: changes the store (--faiss-index); else the manifest's


@dataclass(frozen=True)
class StoreSetting:
    """One setting of a store: its ``StoreOptions`` attribute (and manifest key) ``name``, its
    command-line option ``flag`` with ``help``, ``default`` and ``type`` (str, int, float, bool or
    an Enum of choices), shown in the help panel ``panel`` (None: with the command's own options).

    ``at_query``: `instemb-rag query` takes it too (``query_help``), overriding the value the
    index recorded, and then answers in its own process. ``minimum``: the least value a number may
    take. ``on_existing_index``: THIS_RUN, AS_CREATED or THIS_RUN_ELSE_RECORDED (see above).

    It is also how ``StoreOptions`` reads it: an attribute that answers the value given, or the
    default (a data descriptor, set on ``StoreSettings`` by ``register_store``)."""

    name: str
    flag: str
    help: str
    default: Any = None
    type: Any = str
    minimum: float | None = None
    envvar: str | None = None
    panel: str | None = None
    at_query: bool = False
    query_help: str | None = None
    on_existing_index: str = THIS_RUN

    def __get__(self, instance, owner=None):
        if instance is None:
            return self
        return instance.settings.get(self.name, self.default)

    def __set__(self, instance, value) -> None:
        if value is None:
            instance.settings.pop(self.name, None)
        else:
            instance.settings[self.name] = value


@dataclass(frozen=True)
class StoreRegistration:
    """A vector store: ``name`` (``--store NAME``), ``summary`` (a line of `index --help`),
    ``store_class`` (the class, or "module:Class" imported when the store opens; its class methods
    ``open`` and ``wipe`` are what the registry calls, base.py), its ``settings``, and
    ``kept_open``: whether the resident query process may keep an index of this store open
    between queries (False: opened for one query and closed after it, as an embedded Qdrant shard,
    which holds the index lock while open).

    ``worker_sink`` and ``worker_writer`` (None: the driver writes every point), each a function
    or "module:function": where `index --ray`'s workers write the points themselves (a Qdrant server
    collection: qdrant_ray.py). ``worker_sink(store, options)`` answers, on the driver, a picklable
    dict naming the store (``"store"``), or None where the driver writes this one;
    ``worker_writer(sink, dimension)`` opens it in a worker: an object with ``upsert(ids, vectors,
    payloads)``. The driver's store then has ``delete``, ``upsert`` and ``flush``."""

    name: str
    store_class: Any
    summary: str
    settings: tuple[StoreSetting, ...] = ()
    kept_open: bool = True
    worker_sink: Any = None
    worker_writer: Any = None

    def load(self) -> type:
        """The store's class (imported here when named as "module:Class")."""
        return _named(self.store_class)


def _named(value: Any) -> Any:
    """``value`` itself, or the attribute a "module:attribute" string names (imported here)."""
    if not isinstance(value, str):
        return value
    module, _, attribute = value.partition(":")
    return getattr(importlib.import_module(module), attribute)


def worker_sink(store: Any, options: Any) -> dict | None:
    """What `index --ray`'s workers are handed to write ``store``'s points themselves (its
    registration's ``worker_sink``), or None: the driver writes them."""
    for registration in registered_stores().values():
        if registration.worker_sink is not None and isinstance(store, registration.load()):
            return _named(registration.worker_sink)(store, options)
    return None


def open_worker_writer(sink: dict, dimension: int) -> Any:
    """In a Ray worker: the writer of the store ``sink`` names (its registration's ``worker_writer``)."""
    registration = store_registration(sink["store"], "sink", ValueError)
    if registration.worker_writer is None:
        raise ValueError(f"The store {registration.name} has no worker writer: its driver writes its points.")
    return _named(registration.worker_writer)(sink, dimension)


class StoreSettings:
    """The settings of the registered stores, given by name: each registered one is an attribute
    (answering the default when not given); a name no store registered is refused."""

    def __init__(self, **settings: Any):
        known = {setting.name for setting in store_settings()}
        unknown = sorted(set(settings) - known)
        if unknown:
            raise BadInputError(
                f"No registered store has the setting {', '.join(unknown)}; the settings are: {', '.join(sorted(known))}."
            )
        self.settings = {name: value for name, value in settings.items() if value is not None}


_registered: dict[str, StoreRegistration] = {}
_store_kinds: dict[tuple[str, ...], type[Enum]] = {}


def __getattr__(name: str):
    """``StoreKind``: the registered stores as an enum (what typer lists and checks for
    ``--store``), made when asked for, so a store registered since is in it."""
    if name != "StoreKind":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    names = tuple(registered_stores())
    if names not in _store_kinds:
        kind = Enum("StoreKind", [(store, store) for store in names], type=str, module=__name__)
        kind.__doc__ = "``--store``: a registered vector store (registry.py)."
        _store_kinds[names] = kind
    return _store_kinds[names]


_built_in_loaded = False


def _load_built_in() -> None:
    global _built_in_loaded
    if _built_in_loaded:
        return
    _built_in_loaded = True
    for module in BUILT_IN:
        register_store(importlib.import_module(f"{__package__}.{module}").REGISTRATION)


def registered_stores() -> dict[str, StoreRegistration]:
    """Every registered store by name, the built-in ones first."""
    _load_built_in()
    return dict(_registered)


def store_settings(at_query: bool = False) -> list[StoreSetting]:
    """The settings of every registered store, in registration order (``at_query``: those
    `instemb-rag query` takes)."""
    return [
        setting
        for registration in registered_stores().values()
        for setting in registration.settings
        if setting.at_query or not at_query
    ]


def store_registration(name, field: str = "--store", error_type: type[Exception] = BadInputError) -> StoreRegistration:
    """The registration of the store ``name`` (a string or an enum member), or ``error_type``
    naming ``field`` and the registered stores."""
    stores = registered_stores()
    key = getattr(name, "value", name)
    if key not in stores:
        raise error_type(f"{field} must be one of {', '.join(stores)}, got {key!r}")
    return stores[key]


def register_store(registration: StoreRegistration) -> StoreRegistration:
    """Add a store: `instemb-rag index --store NAME`, its options and ``StoreOptions``' attributes
    read it from now on. A name, setting or flag another store holds is refused."""
    _load_built_in()
    if _registered.get(registration.name) == registration:
        return registration
    if registration.name in _registered:
        raise ValueError(f"A store named {registration.name!r} is registered already: unregister_store() it first.")
    taken = {(s.name, s.flag): other.name for other in _registered.values() for s in other.settings}
    for setting in registration.settings:
        clash = [store for (name, flag), store in taken.items() if setting.name == name or setting.flag == flag]
        if clash or setting.name in ("store", "settings"):
            raise ValueError(
                f"Store {registration.name!r}: the setting {setting.name} ({setting.flag}) is taken "
                f"({clash[0] if clash else 'StoreOptions'}): name it after the store, e.g. {registration.name}_..."
            )
    _registered[registration.name] = registration
    for setting in registration.settings:
        setattr(StoreSettings, setting.name, setting)
    return registration


def unregister_store(name: str) -> None:
    """Remove a store registered with ``register_store`` (a test's, when it ends)."""
    registration = _registered.pop(name)
    for setting in registration.settings:
        if isinstance(vars(StoreSettings).get(setting.name), StoreSetting):
            delattr(StoreSettings, setting.name)


# The built-in stores are registered with the registry itself (their modules are light), so that
# ``StoreOptions`` has their settings as attributes wherever it is imported.
_load_built_in()
