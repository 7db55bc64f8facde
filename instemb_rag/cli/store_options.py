"""The vector stores' command-line options, read from the store registry (index/stores/registry.py):
``--store`` (one of the registered stores) and one option per registered store setting.

typer reads a command's options from its signature. ``store_options`` wraps the command in an
object whose signature is read from the registry each time typer reads it, so that a store
registered after this module was imported (a plugin's, a test's) has its options too: the
command's ``stores`` parameter becomes ``--store`` (``with_store``) and one option per setting
(in the setting's help panel: "Qdrant server"), and the command is called with their values as
one ``StoreOptions`` (a setting not given is None there).

    @store_options()
    def index_command(path: Path = ..., stores: StoreOptions = STORE_OPTIONS_HERE, ray: ...): ...
"""

from __future__ import annotations

import inspect
from enum import Enum
from typing import Any

import typer

from ..index.stores.registry import THIS_RUN_ELSE_RECORDED, StoreSetting, store_settings

__all__ = ["STORE_OPTIONS_HERE", "store_options"]

# The default of a command's ``stores`` parameter: where the store options go.
STORE_OPTIONS_HERE: Any = None
STORE_HELP = "Vector store; default: faiss for a new index, the index's own otherwise."


def setting_option(setting: StoreSetting, at_query: bool):
    """A store setting's typed option, defaulting to the setting's default, except where a value
    given changes an existing index (THIS_RUN_ELSE_RECORDED: --faiss-index) or overrides it (a
    query's): None there, so that not giving it keeps what the index recorded."""
    keeps_recorded = at_query or setting.on_existing_index == THIS_RUN_ELSE_RECORDED
    return typer.Option(
        None if keeps_recorded else setting.default,
        setting.flag,
        help=(setting.query_help or setting.help) if at_query else setting.help,
        envvar=setting.envvar,
        min=setting.minimum if setting.type in (int, float) else None,
        rich_help_panel=setting.panel,
    )


class CommandWithStoreOptions:
    """``command`` with its ``stores`` parameter in the place of ``--store`` (``with_store``) and
    one option per registered store setting (``at_query``: those `query` takes), read from the
    registry whenever asked."""

    def __init__(self, command, with_store: bool, at_query: bool):
        self.command = command
        self.with_store = with_store
        self.at_query = at_query
        for name in ("__module__", "__name__", "__qualname__", "__doc__"):
            setattr(self, name, getattr(command, name))

    @property
    def __signature__(self) -> inspect.Signature:
        from ..index.stores import registry

        signature = inspect.signature(self.command, eval_str=True)
        parameters = list(signature.parameters.values())
        at = next((n for n, parameter in enumerate(parameters) if parameter.name == "stores"), None)
        if at is None:
            raise TypeError(f"{self.__name__} has no 'stores' parameter for the store options.")
        settings = store_settings(self.at_query)
        clash = sorted({setting.name for setting in settings} & set(signature.parameters))
        if clash:
            raise TypeError(f"{self.__name__} has a parameter named as a store setting ({', '.join(clash)}).")
        options = [
            parameters[at].replace(
                name=setting.name,
                default=setting_option(setting, self.at_query),
                annotation=bool if setting.type is bool else setting.type | None,
            )
            for setting in settings
        ]
        if self.with_store:  # the stores registered now (registry.StoreKind)
            store = typer.Option(None, "--store", help=STORE_HELP)
            options.insert(0, parameters[at].replace(name="store", default=store, annotation=registry.StoreKind | None))
        return signature.replace(parameters=parameters[:at] + options + parameters[at + 1 :])

    @property
    def __annotations__(self) -> dict[str, Any]:
        signature = self.__signature__
        return {
            **{parameter.name: parameter.annotation for parameter in signature.parameters.values()},
            "return": signature.return_annotation,
        }

    def __call__(self, **values: Any) -> Any:
        from ..index.options import StoreOptions

        names = {setting.name for setting in store_settings(self.at_query)}
        given = {name: values.pop(name) for name in list(values) if name in names}
        given = {name: value.value if isinstance(value, Enum) else value for name, value in given.items()}
        store = values.pop("store", None) if self.with_store else None
        return self.command(**values, stores=StoreOptions(store, **given))


def store_options(with_store: bool = True, at_query: bool = False):
    """A decorator: the command's ``stores`` parameter becomes ``--store`` (``with_store``) and one
    option per registered store setting (``at_query``: those `instemb-rag query` takes), and the
    command gets their values as one ``StoreOptions``."""

    def decorate(command) -> CommandWithStoreOptions:
        return CommandWithStoreOptions(command, with_store, at_query)

    return decorate
