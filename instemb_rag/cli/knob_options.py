"""The query-time knobs as command-line options: one typed option per declared knob (knobs.py),
handed to the command as one mapping, name -> value.

typer reads a command's options from its signature, so ``knob_options`` puts one option per
declaration in the place of the command's ``knobs`` parameter, and calls the command with the
values collected into ``knobs``. A new knob gets its option here by being declared; what the
option says (its help, its default) is the command's ``option`` function of the declaration.

    @knob_options(lambda knob: typer.Option(None, knob.option, min=knob.low, max=knob.high, help=knob.help))
    def query_command(text: str = ..., knobs: dict = KNOBS_HERE, explain: bool = ...): ...
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable
from typing import Any

from ..knobs import KNOBS, Knob

__all__ = ["KNOBS_HERE", "knob_options"]

# The default of a command's ``knobs`` parameter: where its knobs' options go.
KNOBS_HERE: Any = None


def knob_options(
    option: Callable[[Knob], Any], annotation: Any = float | None, knobs: Iterable[Knob] | None = None
) -> Callable:
    """A decorator: the command's ``knobs`` parameter becomes one option per knob (``knobs``; None:
    every declared one), ``option(knob)`` typed ``annotation``, and the command gets their values
    as ``knobs``."""
    chosen = {knob.name: knob for knob in (KNOBS.values() if knobs is None else knobs)}

    def decorate(command: Callable) -> Callable:
        signature = inspect.signature(command, eval_str=True)
        parameters = list(signature.parameters.values())
        at = next((n for n, parameter in enumerate(parameters) if parameter.name == "knobs"), None)
        if at is None:
            raise TypeError(f"{command.__name__} has no 'knobs' parameter for the query-time knobs' options.")
        clash = sorted(set(chosen) & set(signature.parameters))
        if clash:
            raise TypeError(f"{command.__name__} names a knob's option itself ({', '.join(clash)}): take 'knobs'.")
        options = [
            parameters[at].replace(name=knob.name, default=option(knob), annotation=annotation)
            for knob in chosen.values()
        ]

        @functools.wraps(command)
        def with_knobs(**values: Any) -> Any:
            given = {name: values.pop(name) for name in chosen}
            return command(**values, knobs=given)

        with_knobs.__signature__ = signature.replace(parameters=parameters[:at] + options + parameters[at + 1 :])
        with_knobs.__annotations__ = {
            **{parameter.name: parameter.annotation for parameter in with_knobs.__signature__.parameters.values()},
            "return": signature.return_annotation,
        }
        return with_knobs

    return decorate
